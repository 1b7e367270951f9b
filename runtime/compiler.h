/* NVRTC: one template instance, compiled straight to CUBIN for the exact sm_XY, or to PTX
 * for the newest virtual architecture NVRTC knows when it does not know the device's (the
 * driver then finishes the job). Instances are named through name expressions, so the
 * mangled name comes from NVRTC rather than from a guess. NVRTC is thread-safe for distinct
 * programs, so compiles run in parallel with no process-wide lock. */
#ifndef JITOPS_RUNTIME_COMPILER_H
#define JITOPS_RUNTIME_COMPILER_H

#include <stddef.h>

#include "jitops/jitops.h"
#include "runtime/sources.h"

typedef struct jitops__target {
  int arch;      /* the GPU's: 90 */
  int emit_ptx;  /* 1 when NVRTC does not know `arch` */
  char name[24]; /* "sm_90", or "compute_89" when emitting PTX */
} jitops__target;

/* The NVRTC version as major * 100 + minor: 1300. */
int jitops__nvrtc_version(void);

/* Chooses how to compile for `arch` (SASS when NVRTC supports it). */
jitops_status jitops__target_resolve(int arch, jitops__target *out);

/* The options every compile gets, before the target's and the caller's. */
extern const char *const jitops__default_options[];
extern const size_t jitops__default_option_count;

typedef struct jitops__compiled {
  void *image; /* CUBIN or NUL-terminated PTX */
  size_t size;
  char *lowered_name;
  double compile_ms;
} jitops__compiled;

/* Compiles `name_expression` from closure[0] with closure[1..] as headers and the complete
 * option list. On JITOPS_ERR_COMPILE the last error holds the NVRTC log. */
jitops_status jitops__compile(const jitops__source *const *closure, size_t closure_count,
                              const char *name_expression, const char *const *options,
                              size_t num_options, jitops__compiled *out);

void jitops__compiled_free(jitops__compiled *compiled);

/* Whether an NVRTC compile has finished in this process (successfully or not). A process's first
 * compile registers exit handlers of NVRTC's and of the C++ library's (background.c, "process
 * exit", needs its own to be newer). */
int jitops__nvrtc_has_compiled(void);

/* Compiles an empty kernel for `target`, for that first compile's side effects alone; the result
 * is dropped. */
void jitops__nvrtc_warm_up(const jitops__target *target);

#endif
