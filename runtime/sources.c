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
static const jitops__source *find(const jitops__source_set *set, const char *name, size_t len) {
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
  *s = (jitops__source){name_copy, text_copy, length, content, 1};
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

/* Finds the next #include of a quoted name at or after `p`; sets *name and *len. */
static const char *next_include(const char *p, const char **name, size_t *len) {
  while ((p = strstr(p, "#include")) != NULL) {
    const char *q = p + 8;
    while (*q == ' ' || *q == '\t')
      ++q;
    if (*q == '"') {
      const char *end = strchr(q + 1, '"');
      if (end != NULL && memchr(q + 1, '\n', (size_t)(end - q - 1)) == NULL) {
        *name = q + 1;
        *len = (size_t)(end - q - 1);
        return end + 1;
      }
    }
    p = q;
  }
  return NULL;
}

static int contains(const jitops__source **list, size_t count, const jitops__source *s) {
  for (size_t i = 0; i < count; ++i)
    if (list[i] == s)
      return 1;
  return 0;
}

/* Breadth-first over includes; the list doubles as the queue. Caller holds the lock. */
static jitops_status closure_locked(jitops__source_set *set, const jitops__source *root,
                                    const jitops__source ***out, size_t *count) {
  size_t capacity = 8, n = 0;
  const jitops__source **list = malloc(capacity * sizeof *list);
  if (list == NULL)
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "jitops_kernel_get: out of host memory");
  list[n++] = root;
  for (size_t next = 0; next < n; ++next) {
    const char *p = list[next]->text, *name;
    size_t len;
    while ((p = next_include(p, &name, &len)) != NULL) {
      const jitops__source *dep = find(set, name, len);
      if (dep == NULL || contains(list, n, dep))
        continue;
      if (n == capacity) {
        const jitops__source **bigger = realloc(list, 2 * capacity * sizeof *list);
        if (bigger == NULL) {
          free(list);
          return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "jitops_kernel_get: out of host memory");
        }
        list = bigger;
        capacity *= 2;
      }
      list[n++] = dep;
    }
  }
  *out = list;
  *count = n;
  return JITOPS_SUCCESS;
}

jitops_status jitops__sources_closure(jitops__source_set *set, const char *name,
                                      const jitops__source ***closure, size_t *count,
                                      jitops__key *closure_hash) {
  pthread_mutex_lock(&set->lock);
  const jitops__source *root = find(set, name, strlen(name));
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
