#include "runtime/sources.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/embedded.h"
#include "common/error.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

enum { MAX_NAME_BYTES = 255 };

static int name_is_valid(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > MAX_NAME_BYTES)
    return 0;
  for (const char *p = name; *p; ++p) {
    char c = *p;
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '.' || c == '/' || c == '-';
    if (!ok)
      return 0;
  }
  return 1;
}

/* Caller holds the lock. */
static jitops__source *find(const jitops__source_set *set, const char *name, size_t len) {
  for (size_t i = 0; i < set->count; ++i)
    if (strlen(set->items[i]->name) == len && memcmp(set->items[i]->name, name, len) == 0)
      return set->items[i];
  return NULL;
}

/* Appends a zeroed source and returns it, or NULL when out of memory. */
static jitops__source *append_source(jitops__source_set *set) {
  if (set->count == set->capacity) {
    size_t capacity = set->capacity ? 2 * set->capacity : 32;
    jitops__source **items = realloc(set->items, capacity * sizeof *items);
    if (items == NULL)
      return NULL;
    set->items = items;
    set->capacity = capacity;
  }
  jitops__source *s = calloc(1, sizeof *s);
  if (s != NULL)
    set->items[set->count++] = s;
  return s;
}

jitops_status jitops__sources_init(jitops__source_set *set) {
  memset(set, 0, sizeof *set);
  pthread_mutex_init(&set->lock, NULL);
  for (size_t i = 0; i < jitops__embedded_source_count; ++i) {
    const jitops__embedded_source *e = &jitops__embedded_sources[i];
    jitops__source *s = append_source(set);
    if (s == NULL)
      return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "jitops_runtime_create: out of host memory");
    s->name = (char *)e->name;
    s->text = (char *)e->text;
    s->length = e->length;
    s->content = jitops__content_hash(e->text, e->length);
    s->owned = 0;
  }
  return JITOPS_SUCCESS;
}

void jitops__sources_free(jitops__source_set *set) {
  for (size_t i = 0; i < set->count; ++i) {
    if (set->items[i]->owned) {
      free(set->items[i]->name);
      free(set->items[i]->text);
    }
    free(set->items[i]->includes);
    free(set->items[i]);
  }
  free(set->items);
  pthread_mutex_destroy(&set->lock);
  memset(set, 0, sizeof *set);
}

static jitops_status add_locked(jitops__source_set *set, const char *name, const char *text) {
  size_t length = strlen(text);
  jitops__key content = jitops__content_hash(text, length);
  const jitops__source *existing = find(set, name, strlen(name));
  if (existing != NULL) {
    if (jitops__key_equal(existing->content, content))
      return JITOPS_SUCCESS;
    return jitops__fail(JITOPS_ERR_ALREADY_EXISTS,
                        "jitops_source_register: a different source is already registered "
                        "under the name \"%s\"",
                        name);
  }
  char *name_copy = strdup(name);
  char *text_copy = malloc(length + 1);
  jitops__source *s = name_copy && text_copy ? append_source(set) : NULL;
  if (s == NULL) {
    free(name_copy);
    free(text_copy);
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "jitops_source_register: out of host memory");
  }
  memcpy(text_copy, text, length + 1);
  *s = (jitops__source){name_copy, text_copy, length, content, 1, NULL};
  return JITOPS_SUCCESS;
}

jitops_status jitops__sources_register(jitops__source_set *set, const char *name,
                                       const char *text) {
  if (!name_is_valid(name))
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "jitops_source_register: name \"%.64s\" must be 1 to %d characters of "
                        "[A-Za-z0-9_./-]",
                        name, MAX_NAME_BYTES);
  pthread_mutex_lock(&set->lock);
  jitops_status status = add_locked(set, name, text);
  pthread_mutex_unlock(&set->lock);
  return status;
}

/* ---- include directives ---------------------------------------------------------------- */

typedef enum include_form {
  INCLUDE_QUOTED,  /* #include "name" */
  INCLUDE_ANGLED,  /* #include <name> */
  INCLUDE_COMPUTED /* #include MACRO: the file name comes from a macro */
} include_form;

typedef struct include_directive {
  include_form form;
  const char *name; /* the operand, not NUL-terminated */
  size_t length;
} include_directive;

static const char *skip_blanks(const char *p) {
  while (*p == ' ' || *p == '\t')
    ++p;
  return p;
}

/* Parses the directive at line start `line`, if it is an #include or #include_next (any
 * spacing the preprocessor allows around '#'). */
static int parse_include(const char *line, include_directive *out) {
  const char *p = skip_blanks(line);
  if (*p != '#')
    return 0;
  p = skip_blanks(p + 1);
  size_t word = strncmp(p, "include_next", 12) == 0 ? 12 : strncmp(p, "include", 7) == 0 ? 7 : 0;
  if (word == 0 || (p[word] != ' ' && p[word] != '\t' && p[word] != '"' && p[word] != '<'))
    return 0;
  p = skip_blanks(p + word);
  const char *close = *p == '"' ? "\"" : *p == '<' ? ">" : NULL;
  size_t length = close ? strcspn(p + 1, close[0] == '"' ? "\"\n" : ">\n") : strcspn(p, "\n");
  out->form = close == NULL ? INCLUDE_COMPUTED : close[0] == '"' ? INCLUDE_QUOTED : INCLUDE_ANGLED;
  out->name = close ? p + 1 : p;
  out->length = length;
  if (close != NULL && p[1 + length] != close[0])
    out->form = INCLUDE_COMPUTED; /* unterminated: not a plain file name */
  return 1;
}

/* The end of the line starting at `p`: its '\n', or the text's NUL. */
static const char *line_end(const char *p) {
  const char *newline = strchr(p, '\n');
  return newline != NULL ? newline : p + strlen(p);
}

/* Finds the next #include directive at or after the line start `p`; returns the end of its
 * line, or NULL. Directives are recognized by the text alone, so one inside a block comment
 * or a skipped #if counts too. */
static const char *next_include(const char *p, include_directive *out) {
  for (const char *end; *p != 0; p = *end == '\n' ? end + 1 : end) {
    end = line_end(p);
    if (parse_include(p, out))
      return end;
  }
  return NULL;
}

/* An __has_include of an absolute path: NVRTC would look on disk. Its operand in *out. */
static int has_absolute_has_include(const char *text, include_directive *out) {
  for (const char *p = text; (p = strstr(p, "__has_include")) != NULL; ++p) {
    const char *q = skip_blanks(p + 13 + (strncmp(p + 13, "_next", 5) == 0 ? 5 : 0));
    if (*q != '(')
      continue;
    q = skip_blanks(q + 1);
    if ((*q == '"' || *q == '<') && q[1] == '/') {
      out->form = *q == '"' ? INCLUDE_QUOTED : INCLUDE_ANGLED;
      out->name = q + 1;
      out->length = strcspn(q + 1, "\">)\n");
      return 1;
    }
  }
  return 0;
}

/* Every byte NVRTC reads must be in the key, so a source may only include registered sources:
 * a file named by an absolute path, or by a macro, is refused. (A relative name that no
 * registered source has is left to NVRTC, which fails: it is given no directory to look in,
 * and --no-source-include.) */
static jitops_status refuse_include(const jitops__source *s, const include_directive *d) {
  if (d->form == INCLUDE_COMPUTED)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "jitops_kernel_get: source \"%s\" includes a file named by a macro "
                        "(#include %.*s), which the cache key cannot cover; include a registered "
                        "source by its name instead",
                        s->name, (int)(d->length < 200 ? d->length : 200), d->name);
  return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                      "jitops_kernel_get: source \"%s\" includes %c%.*s%c, a file on disk, "
                      "which the cache key cannot cover (it holds registered sources only); "
                      "register it with jitops_source_register and include it by that name",
                      s->name, d->form == INCLUDE_QUOTED ? '"' : '<', (int)d->length, d->name,
                      d->form == INCLUDE_QUOTED ? '"' : '>');
}

static int contains(jitops__source *const *list, size_t count, const jitops__source *s) {
  for (size_t i = 0; i < count; ++i)
    if (list[i] == s)
      return 1;
  return 0;
}

/* Appends `s` to the list unless it is there; grows it as needed. */
static jitops_status add_once(jitops__source ***list, size_t *count, size_t *capacity,
                              jitops__source *s) {
  if (contains(*list, *count, s))
    return JITOPS_SUCCESS;
  if (*count == *capacity) {
    jitops__source **bigger = realloc(*list, 2 * *capacity * sizeof **list);
    if (bigger == NULL)
      return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "jitops_kernel_get: out of host memory");
    *list = bigger;
    *capacity *= 2;
  }
  (*list)[(*count)++] = s;
  return JITOPS_SUCCESS;
}

/* A source's directives: its __has_include of an absolute path, if any, then every #include
 * in the order of the text. */
struct jitops__include_list {
  int has_absolute; /* an __has_include of an absolute path, in absolute_operand */
  include_directive absolute_operand;
  size_t count;
  include_directive items[];
};

/* Parses `s`'s directives once; NULL when out of host memory. Caller holds the lock. */
static const struct jitops__include_list *includes_of(jitops__source *s) {
  if (s->includes != NULL)
    return s->includes;
  size_t capacity = 8;
  struct jitops__include_list *list = malloc(sizeof *list + capacity * sizeof list->items[0]);
  if (list == NULL)
    return NULL;
  list->has_absolute = has_absolute_has_include(s->text, &list->absolute_operand);
  list->count = 0;
  include_directive d;
  for (const char *p = s->text; (p = next_include(p, &d)) != NULL;) {
    if (list->count == capacity) {
      capacity *= 2;
      struct jitops__include_list *bigger =
          realloc(list, sizeof *list + capacity * sizeof list->items[0]);
      if (bigger == NULL) {
        free(list);
        return NULL;
      }
      list = bigger;
    }
    list->items[list->count++] = d;
  }
  s->includes = list;
  return list;
}

/* Adds the registered sources `s` includes; refuses an include of a file on disk. */
static jitops_status scan_includes(jitops__source_set *set, jitops__source *s,
                                   jitops__source ***list, size_t *count, size_t *capacity) {
  const struct jitops__include_list *includes = includes_of(s);
  if (includes == NULL)
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "jitops_kernel_get: out of host memory");
  if (includes->has_absolute)
    return refuse_include(s, &includes->absolute_operand);
  for (size_t i = 0; i < includes->count; ++i) {
    const include_directive *d = &includes->items[i];
    jitops__source *dep = d->form == INCLUDE_COMPUTED ? NULL : find(set, d->name, d->length);
    if (dep != NULL)
      JITOPS__TRY(add_once(list, count, capacity, dep));
    else if (d->form == INCLUDE_COMPUTED || (d->length > 0 && d->name[0] == '/'))
      return refuse_include(s, d);
  }
  return JITOPS_SUCCESS;
}

/* Breadth-first over includes; the list doubles as the queue. Caller holds the lock. The list
 * holds the set's own (writable) sources, whose include lists it fills in; the caller gets it
 * read-only. */
static jitops_status closure_locked(jitops__source_set *set, jitops__source *root,
                                    const jitops__source ***out, size_t *count) {
  size_t capacity = 8, n = 0;
  jitops__source **list = malloc(capacity * sizeof *list);
  if (list == NULL)
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "jitops_kernel_get: out of host memory");
  list[n++] = root;
  for (size_t next = 0; next < n; ++next) {
    jitops_status status = scan_includes(set, list[next], &list, &n, &capacity);
    if (status != JITOPS_SUCCESS) {
      free(list);
      return status;
    }
  }
  *out = (const jitops__source **)list;
  *count = n;
  return JITOPS_SUCCESS;
}

jitops_status jitops__sources_closure(jitops__source_set *set, const char *name,
                                      const jitops__source ***closure, size_t *count,
                                      jitops__key *closure_hash) {
  pthread_mutex_lock(&set->lock);
  jitops__source *root = find(set, name, strlen(name));
  jitops_status status = JITOPS_SUCCESS;
  if (root == NULL)
    status = jitops__fail(JITOPS_ERR_NOT_FOUND,
                          "jitops_kernel_get: no source is registered under the name \"%s\"", name);
  else
    status = closure_locked(set, root, closure, count);
  pthread_mutex_unlock(&set->lock);
  if (status != JITOPS_SUCCESS)
    return status;
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_128bits_reset(&state);
  for (size_t i = 0; i < *count; ++i) {
    uint8_t content[16];
    jitops__key_to_bytes((*closure)[i]->content, content);
    XXH3_128bits_update(&state, (*closure)[i]->name, strlen((*closure)[i]->name) + 1);
    XXH3_128bits_update(&state, content, sizeof content);
  }
  XXH128_hash_t h = XXH3_128bits_digest(&state);
  closure_hash->lo = h.low64;
  closure_hash->hi = h.high64;
  return JITOPS_SUCCESS;
}

void jitops__source_op(const char *source_name, char *out, size_t size) {
  static const char prefix[] = "jitops/";
  if (strncmp(source_name, prefix, sizeof prefix - 1) != 0) {
    snprintf(out, size, "%s", source_name);
    return;
  }
  const char *stem = source_name + sizeof prefix - 1;
  size_t length = strcspn(stem, "_.");
  snprintf(out, size, "%.*s", (int)length, stem);
}
