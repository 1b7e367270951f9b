/* A kernel request, end to end: the runtime's memory registry, then the process-wide image
 * table (images.h: what another runtime of this process built), then the disk tier (main
 * database and shipped tier), then the remote tier, then NVRTC; and the launch. The hot path (a
 * registry hit) is one hash over the request's strings, one probe under a read lock and one relaxed
 * counter increment. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "runtime/context.h"
#include "runtime/images.h"
#include "runtime/kernel_batch.h"
#include "runtime/runtime_internal.h"

static const char *const fn_get = "jitops_kernel_get";

jitops_status jitops_source_register(jitops_runtime_t *rt, const char *name, const char *source) {
  JITOPS__REQUIRE_NONNULL("jitops_source_register", rt);
  JITOPS__REQUIRE_NONNULL("jitops_source_register", name);
  JITOPS__REQUIRE_NONNULL("jitops_source_register", source);
  return jitops__sources_register(&rt->sources, name, source);
}

/* ---- options --------------------------------------------------------------------------- */

enum { MAX_OPTIONS = 256, MAX_OPTION_BYTES = 4096 };

static int is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The complete option list: our defaults, the target, then the caller's, each trimmed.
 * The strings live in `storage`. */
typedef struct option_list {
  const char *items[MAX_OPTIONS + 8];
  size_t count;
  char storage[MAX_OPTION_BYTES + 64];
  size_t used;
} option_list;

static jitops_status add_option(option_list *list, const char *text, size_t length) {
  if (list->used + length + 1 > sizeof list->storage)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: options exceed %d bytes in all", fn_get,
                        MAX_OPTION_BYTES);
  char *copy = list->storage + list->used;
  memcpy(copy, text, length);
  copy[length] = 0;
  list->used += length + 1;
  list->items[list->count++] = copy;
  return JITOPS_SUCCESS;
}

/* Options a caller may not pass: those that set what the library sets, and those that make
 * NVRTC read files, which the cache key could not cover (a header changed on disk would be
 * served stale from the cache). */
static const char reads_files[] = "makes NVRTC read files the cache key cannot cover; register "
                                  "headers with jitops_source_register and include them by name";

static const struct refused_option {
  const char *prefix;
  const char *why;
} refused_options[] = {
    {"-arch", "sets what the library sets (the target)"},
    {"--gpu-architecture", "sets what the library sets (the target)"},
    {"-std", "sets what the library sets (the language standard)"},
    {"--std", "sets what the library sets (the language standard)"},
    {"-I", reads_files},
    {"--include-path", reads_files},
    {"-include", reads_files},
    {"--pre-include", reads_files},
    {"-pch", reads_files},
    {"--pch", reads_files},
    {"-create-pch", reads_files},
    {"--create-pch", reads_files},
    {"-use-pch", reads_files},
    {"--use-pch", reads_files},
};

static jitops_status check_user_option(const char *option, size_t index, size_t length) {
  if (length == 0)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: options[%zu] is empty", fn_get, index);
  for (size_t i = 0; i < sizeof refused_options / sizeof refused_options[0]; ++i)
    if (strncmp(option, refused_options[i].prefix, strlen(refused_options[i].prefix)) == 0)
      return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: options[%zu] \"%.*s\" %s", fn_get,
                          index, (int)length, option, refused_options[i].why);
  return JITOPS_SUCCESS;
}

static jitops_status build_options(const jitops_runtime_t *rt, const char *const *options,
                                   size_t num_options, option_list *list) {
  list->count = list->used = 0;
  for (size_t i = 0; i < jitops__default_option_count; ++i)
    JITOPS__TRY(add_option(list, jitops__default_options[i], strlen(jitops__default_options[i])));
  char target[48];
  int n = snprintf(target, sizeof target, "--gpu-architecture=%s", rt->target.name);
  JITOPS__TRY(add_option(list, target, (size_t)n));
  for (size_t i = 0; i < num_options; ++i) {
    const char *begin = options[i], *end = begin + strlen(begin);
    while (is_space(*begin))
      ++begin;
    while (end > begin && is_space(end[-1]))
      --end;
    JITOPS__TRY(check_user_option(begin, i, (size_t)(end - begin)));
    JITOPS__TRY(add_option(list, begin, (size_t)(end - begin)));
  }
  return JITOPS_SUCCESS;
}

static jitops_status check_request(const jitops_runtime_t *rt, const char *source_name,
                                   const char *name_expression, const char *const *options,
                                   size_t num_options, jitops_kernel_t **out) {
  JITOPS__REQUIRE_NONNULL(fn_get, rt);
  JITOPS__REQUIRE_NONNULL(fn_get, source_name);
  JITOPS__REQUIRE_NONNULL(fn_get, name_expression);
  JITOPS__REQUIRE_NONNULL(fn_get, out);
  if (name_expression[0] == 0)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: name_expression is empty", fn_get);
  if (num_options > 0 && options == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: options is NULL but num_options is %zu",
                        fn_get, num_options);
  if (num_options > MAX_OPTIONS)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: num_options %zu exceeds %d", fn_get,
                        num_options, MAX_OPTIONS);
  for (size_t i = 0; i < num_options; ++i)
    if (options[i] == NULL)
      return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: options[%zu] is NULL", fn_get, i);
  return JITOPS_SUCCESS;
}

/* ---- building a kernel ----------------------------------------------------------------- */

/* Loads an image into the runtime's context (nothing to do when compile-only). A module load
 * touches no stream, but the driver counts it among the calls a graph capture in the global
 * mode (torch.cuda.graph's) refuses, and refusing it would spoil that capture: a kernel loaded
 * while some thread captures (a call being captured on a cold kernel, the background builds of
 * background.h) is loaded in the relaxed mode. */
static jitops_status load_image(jitops_runtime_t *rt, jitops_kernel_t *k, const void *image) {
  if (rt->context == NULL)
    return JITOPS_SUCCESS;
  int pushed;
  JITOPS__TRY(jitops__context_push(rt, &pushed));
  const int saved = jitops__capture_relax(rt);
  CUresult r = rt->driver->cuModuleLoadData(&k->module, image);
  if (r == CUDA_SUCCESS) {
    r = rt->driver->cuModuleGetFunction(&k->function, k->module, k->lowered_name);
    int static_shared = 0;
    if (r == CUDA_SUCCESS)
      r = rt->driver->cuFuncGetAttribute(&static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                                         k->function);
    k->static_shared = (uint32_t)static_shared;
    if (r != CUDA_SUCCESS) {
      rt->driver->cuModuleUnload(k->module);
      k->module = NULL;
    }
  }
  jitops__capture_restore(rt, saved);
  jitops__context_restore(rt, pushed);
  if (r != CUDA_SUCCESS)
    return jitops__driver_fail(rt->driver, r, "jitops_kernel_get: loading the module");
  return JITOPS_SUCCESS;
}

static void join_options(const option_list *list, char *out, size_t size) {
  size_t used = 0;
  out[0] = 0;
  for (size_t i = 0; i < list->count && used < size; ++i)
    used += (size_t)snprintf(out + used, size - used, "%s%s", i ? " " : "", list->items[i]);
}

typedef struct request {
  const char *source_name;
  const char *name_expression;
  const jitops__source **closure;
  size_t closure_count;
  option_list options;
  jitops__image *pending; /* the image table's entry this thread builds, until published */
  int stored_only;        /* memory and disk only: no claim, remote tier, NVRTC or waiting */
} request;

/* Hands the image the kernel was just loaded from to the other runtimes of the process; the
 * kernel keeps the builder's reference. Without memory for the copy, nothing is shared. */
static void share_image(jitops_kernel_t *k, request *req, const void *image, size_t size) {
  if (req->pending != NULL && jitops__images_publish(req->pending, image, size, k->lowered_name))
    k->image = req->pending;
  req->pending = NULL;
}

/* The row this runtime stores for `req`: its own op, name expression and options (joined into
 * `joined`), under `key`. The caller fills in the image, its kind, lowered name and compile
 * time. */
static void row_for(const jitops_runtime_t *rt, const jitops_kernel_t *k, const request *req,
                    const uint8_t key[16], char *joined, size_t joined_size,
                    jitops__store_row *row) {
  join_options(&req->options, joined, joined_size);
  memset(row, 0, sizeof *row);
  memcpy(row->key, key, 16);
  row->op = k->op;
  row->name_expression = req->name_expression;
  row->target = rt->target.name;
  row->nvrtc_version = rt->nvrtc_version;
  row->options = joined;
  row->kind = rt->target.emit_ptx ? JITOPS__BLOB_PTX : JITOPS__BLOB_CUBIN;
}

/* Whether the options ask for a quick build (kernel_batch.h). */
static int is_quick(const option_list *list) {
  for (size_t i = 0; i < list->count; ++i)
    if (strcmp(list->items[i], JITOPS__QUICK_OPTION) == 0)
      return 1;
  return 0;
}

static jitops_status compile_and_store(jitops_runtime_t *rt, jitops_kernel_t *k, request *req,
                                       uint8_t key[16], jitops__remote_outcome *remote) {
  jitops__compiled compiled;
  jitops_status status =
      jitops__compile((const jitops__source *const *)req->closure, req->closure_count,
                      req->name_expression, req->options.items, req->options.count, &compiled);
  if (status != JITOPS_SUCCESS) {
    __atomic_fetch_add(&rt->compile_errors, 1, __ATOMIC_RELAXED);
    jitops__store_unclaim(rt->store, key);
    jitops__remote_unclaim(rt->remote, key, remote);
    return status;
  }
  __atomic_fetch_add(&rt->compiles, 1, __ATOMIC_RELAXED);
  if (is_quick(&req->options))
    __atomic_fetch_add(&rt->quick_compiles, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&rt->compile_us, (uint64_t)(compiled.compile_ms * 1000.0), __ATOMIC_RELAXED);
  k->compiles = 1;
  jitops__log(JITOPS__LOG_INFO, "compiled %s for %s in %.1f ms", req->name_expression,
              rt->target.name, compiled.compile_ms);
  k->lowered_name = compiled.lowered_name;
  compiled.lowered_name = NULL;
  char joined[MAX_OPTION_BYTES + 64];
  jitops__store_row row;
  row_for(rt, k, req, key, joined, sizeof joined, &row);
  row.lowered_name = k->lowered_name;
  row.image = compiled.image;
  row.size = compiled.size;
  row.compile_ms = compiled.compile_ms;
  jitops__store_put(rt->store, &row);
  jitops__remote_publish(rt->remote, &row, remote);
  status = load_image(rt, k, compiled.image);
  if (status == JITOPS_SUCCESS)
    share_image(k, req, compiled.image, compiled.size);
  jitops__compiled_free(&compiled);
  return status;
}

/* Loads an image that was built elsewhere (on disk, on the server, by another runtime), whose
 * kernel is `lowered_name`. */
static jitops_status load_named(jitops_runtime_t *rt, jitops_kernel_t *k, const char *lowered_name,
                                const void *image) {
  k->lowered_name = strdup(lowered_name);
  if (k->lowered_name == NULL)
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn_get);
  return load_image(rt, k, image);
}

/* Loads a blob found on disk or on the server, and shares it. A blob the driver refuses is
 * treated as a miss. */
static int use_blob(jitops_runtime_t *rt, jitops_kernel_t *k, request *req,
                    const char *lowered_name, const void *image, size_t size) {
  jitops_status status = load_named(rt, k, lowered_name, image);
  if (status == JITOPS_SUCCESS) {
    share_image(k, req, image, size);
    return 1;
  }
  jitops__log(JITOPS__LOG_WARN, "a cached kernel did not load (%s): recompiling it",
              jitops_last_error());
  free(k->lowered_name);
  k->lowered_name = NULL;
  return 0;
}

/* The disk tier: the main database, the shipped tier, then the claim (which may find the row
 * another process stored meanwhile). A miss leaves the key claimed by this process. */
static int from_disk(jitops_runtime_t *rt, jitops_kernel_t *k, request *req,
                     const uint8_t key[16]) {
  if (rt->store == NULL)
    return 0;
  jitops__blob blob;
  int waited = 0;
  int found = jitops__store_get(rt->store, key, &blob) ||
              (!req->stored_only &&
               jitops__store_claim(rt->store, key, &blob, &waited) == JITOPS__CLAIM_FOUND);
  if (waited)
    __atomic_fetch_add(&rt->waits, 1, __ATOMIC_RELAXED);
  int used = found && use_blob(rt, k, req, blob.lowered_name, blob.image, blob.size);
  if (found)
    jitops__blob_free(&blob);
  if (!used)
    return 0;
  jitops__log(JITOPS__LOG_DEBUG, "disk hit: %s for %s%s", req->name_expression, rt->target.name,
              waited ? " (after waiting for another process)" : "");
  __atomic_fetch_add(&rt->disk_hits, 1, __ATOMIC_RELAXED);
  k->disk_hits = 1;
  return 1;
}

/* The remote tier. A hit, already verified, is stored on disk (which releases this process's
 * claim there) under this request's own names. */
static int from_remote(jitops_runtime_t *rt, jitops_kernel_t *k, request *req,
                       const uint8_t key[16], jitops__remote_outcome *outcome) {
  char joined[MAX_OPTION_BYTES + 64];
  jitops__store_row row;
  row_for(rt, k, req, key, joined, sizeof joined, &row);
  jitops__remote_expect expect = {rt->target.name, rt->nvrtc_version, row.kind};
  jitops__remote_found found;
  jitops__remote_result result = jitops__remote_fetch(rt->remote, key, &expect, &found, outcome);
  if (outcome->waited)
    __atomic_fetch_add(&rt->waits, 1, __ATOMIC_RELAXED);
  int used = result == JITOPS__REMOTE_HIT &&
             use_blob(rt, k, req, found.row.lowered_name, found.row.image, found.row.size);
  if (used) {
    row.lowered_name = found.row.lowered_name;
    row.image = found.row.image;
    row.size = found.row.size;
    row.compile_ms = found.row.compile_ms;
    jitops__store_put(rt->store, &row);
    jitops__log(JITOPS__LOG_DEBUG, "remote hit: %s for %s%s", req->name_expression, rt->target.name,
                outcome->waited ? " (after waiting for another node)" : "");
    __atomic_fetch_add(&rt->remote_hits, 1, __ATOMIC_RELAXED);
    k->remote_hits = 1;
  } else if (result != JITOPS__REMOTE_SKIPPED) {
    __atomic_fetch_add(&rt->remote_misses, 1, __ATOMIC_RELAXED);
    k->remote_misses = 1;
  }
  jitops__remote_found_free(&found);
  return used;
}

/* Disk tier, remote tier, then NVRTC, for the key this thread claimed in the image table. */
static jitops_status build_from_tiers(jitops_runtime_t *rt, jitops_kernel_t *k, request *req) {
  uint8_t key[16];
  jitops__key_to_bytes(k->cache_key, key);
  if (from_disk(rt, k, req, key))
    return JITOPS_SUCCESS;
  if (req->stored_only)
    return JITOPS_ERR_NOT_FOUND; /* not an error: the caller builds it another way */
  jitops__remote_outcome remote;
  jitops_status status = JITOPS_SUCCESS;
  if (!from_remote(rt, k, req, key, &remote)) {
    jitops__log(JITOPS__LOG_DEBUG, "miss: compiling %s for %s", req->name_expression,
                rt->target.name);
    __atomic_fetch_add(&rt->misses, 1, __ATOMIC_RELAXED);
    k->misses = 1;
    status = compile_and_store(rt, k, req, key, &remote);
  }
  k->remote_errors = remote.errors;
  return status;
}

/* An image another runtime of this process built: loaded into this runtime's context. */
static jitops_status from_shared(jitops_runtime_t *rt, jitops_kernel_t *k, jitops__image *image) {
  jitops_status status = load_named(rt, k, image->lowered_name, image->bytes);
  if (status != JITOPS_SUCCESS) {
    jitops__images_release(image);
    return status;
  }
  k->image = image;
  jitops__log(JITOPS__LOG_DEBUG, "shared hit: %s for %s (built by another runtime)",
              k->lowered_name, rt->target.name);
  __atomic_fetch_add(&rt->shared_hits, 1, __ATOMIC_RELAXED);
  k->memory_hits = 1; /* to the disk tier's usage counts, a request served from memory */
  return JITOPS_SUCCESS;
}

/* The image table, then the tiers. The kernel is pending and owned by this thread. */
static jitops_status build(jitops_runtime_t *rt, jitops_kernel_t *k, request *req) {
  jitops__cache_key_inputs inputs = {rt->target.name,      rt->nvrtc_version,  {0, 0},
                                     req->name_expression, req->options.items, req->options.count};
  JITOPS__TRY(jitops__sources_closure(&rt->sources, req->source_name, &req->closure,
                                      &req->closure_count, &inputs.source_closure));
  k->cache_key = jitops__cache_key(&inputs);
  int build_here;
  jitops__image *image = req->stored_only ? jitops__images_try_acquire(k->cache_key, &build_here)
                                          : jitops__images_acquire(k->cache_key, &build_here);
  if (!build_here && image == NULL)
    return JITOPS_ERR_NOT_FOUND; /* stored-only, and another thread is building it */
  if (!build_here)
    return from_shared(rt, k, image);
  req->pending = image;
  jitops_status status = build_from_tiers(rt, k, req);
  if (req->pending != NULL) /* failed, or loaded nothing to share */
    jitops__images_abandon(req->pending);
  return status;
}

static jitops_kernel_t *new_kernel(jitops_runtime_t *rt, jitops__key lookup_key,
                                   const char *source_name) {
  jitops_kernel_t *k = calloc(1, sizeof *k);
  if (k == NULL)
    return NULL;
  k->runtime = rt;
  k->lookup_key = lookup_key;
  k->state = JITOPS__KERNEL_PENDING;
  char op[256];
  jitops__source_op(source_name, op, sizeof op);
  k->op = strdup(op);
  if (k->op == NULL) {
    free(k);
    return NULL;
  }
  return k;
}

void jitops__kernel_free(jitops_kernel_t *k) {
  if (k == NULL)
    return;
  jitops__images_release(k->image);
  free(k->lowered_name);
  free(k->op);
  free(k);
}

/* Builds the kernel, or waits for the thread already building it. Exactly one thread of a
 * runtime builds a given key; a failed build is removed so a later request retries. */
static jitops_status get_slow(jitops_runtime_t *rt, jitops__key lookup_key, request *req,
                              jitops_kernel_t **out) {
  pthread_mutex_lock(&rt->build_lock);
  jitops_kernel_t *k;
  while ((k = jitops__registry_find(&rt->registry, lookup_key)) != NULL &&
         k->state == JITOPS__KERNEL_PENDING) {
    if (req->stored_only) { /* another thread builds it: not stored, as far as this one goes */
      pthread_mutex_unlock(&rt->build_lock);
      return JITOPS_ERR_NOT_FOUND;
    }
    pthread_cond_wait(&rt->build_done, &rt->build_lock);
  }
  if (k != NULL) { /* built by another thread while this one waited */
    pthread_mutex_unlock(&rt->build_lock);
    __atomic_fetch_add(&rt->memory_hits, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&k->memory_hits, 1, __ATOMIC_RELAXED);
    *out = k;
    return JITOPS_SUCCESS;
  }
  k = new_kernel(rt, lookup_key, req->source_name);
  jitops_status status =
      k ? jitops__registry_insert(&rt->registry, k)
        : jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn_get);
  pthread_mutex_unlock(&rt->build_lock);
  if (status != JITOPS_SUCCESS) {
    jitops__kernel_free(k);
    return status;
  }
  status = build(rt, k, req);
  free(req->closure);
  pthread_mutex_lock(&rt->build_lock);
  if (status == JITOPS_SUCCESS)
    __atomic_store_n(&k->state, JITOPS__KERNEL_READY, __ATOMIC_RELEASE);
  else
    jitops__registry_remove(&rt->registry, k);
  pthread_cond_broadcast(&rt->build_done);
  pthread_mutex_unlock(&rt->build_lock);
  if (status != JITOPS_SUCCESS) {
    jitops__kernel_free(k);
    return status;
  }
  *out = k;
  return JITOPS_SUCCESS;
}

/* The ready kernel of `lookup_key` in the runtime's memory, counted as a memory hit; NULL when
 * it is not ready there. */
static jitops_kernel_t *find_ready(jitops_runtime_t *rt, jitops__key lookup_key) {
  jitops_kernel_t *k = jitops__registry_find_ready(&rt->registry, lookup_key);
  if (k != NULL) {
    __atomic_fetch_add(&k->memory_hits, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&rt->memory_hits, 1, __ATOMIC_RELAXED);
  }
  return k;
}

jitops_kernel_t *jitops__kernel_find_ready(jitops_runtime_t *rt, const char *source_name,
                                           const char *name_expression, const char *const *options,
                                           size_t num_options) {
  return find_ready(rt, jitops__lookup_key(source_name, name_expression, options, num_options));
}

jitops_status jitops_kernel_get(jitops_runtime_t *rt, const char *source_name,
                                const char *name_expression, const char *const *options,
                                size_t num_options, jitops_kernel_t **out) {
  JITOPS__TRY(check_request(rt, source_name, name_expression, options, num_options, out));
  jitops__key lookup_key = jitops__lookup_key(source_name, name_expression, options, num_options);
  jitops_kernel_t *k = find_ready(rt, lookup_key);
  if (k != NULL) {
    *out = k;
    return JITOPS_SUCCESS;
  }
  request req = {source_name, name_expression, NULL, 0, {{0}, 0, {0}, 0}, NULL, 0};
  JITOPS__TRY(build_options(rt, options, num_options, &req.options));
  return get_slow(rt, lookup_key, &req, out);
}

jitops_status jitops__kernel_get_stored(jitops_runtime_t *rt, const char *source_name,
                                        const char *name_expression, const char *const *options,
                                        size_t num_options, jitops_kernel_t **out) {
  jitops__key lookup_key = jitops__lookup_key(source_name, name_expression, options, num_options);
  jitops_kernel_t *k = find_ready(rt, lookup_key);
  if (k != NULL) {
    *out = k;
    return JITOPS_SUCCESS;
  }
  request req = {source_name, name_expression, NULL, 0, {{0}, 0, {0}, 0}, NULL, 1};
  JITOPS__TRY(build_options(rt, options, num_options, &req.options));
  return get_slow(rt, lookup_key, &req, out);
}

const char *jitops_kernel_lowered_name(const jitops_kernel_t *kernel) {
  return kernel && kernel->lowered_name ? kernel->lowered_name : "";
}
