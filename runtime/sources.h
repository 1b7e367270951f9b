/* The sources a runtime can compile: the embedded templates plus what users register.
 * A name's text never changes once registered, which is what lets a request's lookup key
 * stand for its binary. Includes between sources are found by scanning each line for an
 * #include directive, so a kernel's closure holds exactly the sources it can see: the cache
 * key covers them all, and NVRTC gets them as headers.
 *
 * Invariant: NVRTC reads nothing but the closure. An include of a file on disk (an absolute
 * path, or a name made by a macro) is refused; NVRTC is given no directory to search and
 * --no-source-include, so any other name no source has fails to compile. */
#ifndef JITOPS_RUNTIME_SOURCES_H
#define JITOPS_RUNTIME_SOURCES_H

#include <pthread.h>
#include <stddef.h>

#include "jitops/jitops.h"
#include "common/hash.h"

typedef struct jitops__source {
  char *name;
  char *text;
  size_t length;
  jitops__key content;
  int owned; /* 0 for embedded templates, whose text lives in the library */
  /* Its #include directives, parsed at its first closure and kept: they depend on the text
   * alone, which never changes. Which registered source each names is looked up at every
   * closure, since a header may be registered after the source that includes it. Guarded by
   * the set's lock; NULL until parsed. */
  struct jitops__include_list *includes;
} jitops__source;

typedef struct jitops__source_set {
  pthread_mutex_t lock;
  jitops__source **items; /* each allocated alone, so pointers to them stay valid */
  size_t count, capacity;
} jitops__source_set;

/* Starts with the embedded templates. */
jitops_status jitops__sources_init(jitops__source_set *set);
void jitops__sources_free(jitops__source_set *set);

jitops_status jitops__sources_register(jitops__source_set *set, const char *name, const char *text);

/* The closure of `name`: the source itself first, then every source it includes,
 * transitively, once each. `closure_hash` covers their names and contents in that order.
 * The returned array (and the pointers in it, which stay valid for the set's lifetime) is
 * the caller's to free. JITOPS_ERR_NOT_FOUND when `name` is unknown; JITOPS_ERR_INVALID_ARGUMENT
 * when a source includes a file on disk (an absolute path, a macro, or an __has_include of an
 * absolute path), anywhere in its text. Other includes that name no registered source are
 * left to NVRTC, which reports them. */
jitops_status jitops__sources_closure(jitops__source_set *set, const char *name,
                                      const jitops__source ***closure, size_t *count,
                                      jitops__key *closure_hash);

/* The op a source's kernels are counted under in the cache: a built-in template
 * "jitops/scan_backward.cuh" belongs to the family "scan" (its file name up to the first '_'
 * or '.'), which is also the family's name in the prewarm catalogue; a user source is its
 * own op, under its registered name. */
void jitops__source_op(const char *source_name, char *out, size_t size);

#endif
