/* Choices made by timing, and where they are kept.
 *
 * Invariant: for a given key, every call in every process that shares a cache directory
 * makes the same choice once the first process has stored it; concurrent first users wait
 * on the key's claim (the same claim rows that make kernels compile once), so they agree too.
 * Without a disk tier (JITOPS_CACHE=off) a choice lives as long as the op's in-memory cache. */
#include "runtime/tuning.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "runtime/environment.h"
#include "runtime/runtime_internal.h"

/* Timed choices describe the GPU they were timed on, so the device's name (which tells an
 * H100 from an H200, both sm_90) is part of the key. Each part is hashed on its own (with
 * its terminating NUL, so that no two splits of the same bytes collide), then the parts. */
static void tuned_key(const jitops_runtime_t *rt, const char *what, const void *id, size_t id_size,
                      uint8_t out[16]) {
  static const char domain[] = "jitops-tuned-v1";
  jitops__key parts[4] = {jitops__content_hash(domain, sizeof domain),
                          jitops__content_hash(what, strlen(what) + 1),
                          jitops__content_hash(rt->device_name, strlen(rt->device_name) + 1),
                          jitops__content_hash(id, id_size)};
  uint8_t bytes[4][16];
  for (int i = 0; i < 4; ++i)
    jitops__key_to_bytes(parts[i], bytes[i]);
  jitops__key_to_bytes(jitops__content_hash(bytes, sizeof bytes), out);
}

static int take_blob(jitops__blob *blob, void *out, size_t size) {
  int ok = blob->size == size;
  if (ok)
    memcpy(out, blob->image, size);
  jitops__blob_free(blob);
  return ok;
}

int jitops__tuned_get(jitops_runtime_t *runtime, const char *what, const void *id, size_t id_size,
                      void *out, size_t size, jitops__tuned *tuned) {
  memset(tuned, 0, sizeof *tuned);
  tuned_key(runtime, what, id, id_size, tuned->key);
  if (runtime->store == NULL)
    return 0;
  jitops__blob blob;
  if (jitops__store_get(runtime->store, tuned->key, &blob) && take_blob(&blob, out, size))
    return 1;
  int waited = 0;
  if (jitops__store_claim(runtime->store, tuned->key, &blob, &waited) == JITOPS__CLAIM_FOUND)
    return take_blob(&blob, out, size);
  tuned->claimed = true;
  return 0;
}

void jitops__tuned_put(jitops_runtime_t *runtime, const jitops__tuned *tuned, const char *op,
                       const char *description, const void *data, size_t size) {
  if (runtime->store == NULL)
    return;
  jitops__store_row row;
  memset(&row, 0, sizeof row);
  memcpy(row.key, tuned->key, 16);
  row.op = op;
  row.name_expression = description;
  row.lowered_name = "";
  row.target = runtime->target.name;
  row.nvrtc_version = runtime->nvrtc_version;
  row.options = runtime->device_name;
  row.kind = JITOPS__BLOB_TUNED;
  row.image = data;
  row.size = size;
  jitops__store_put(runtime->store, &row);
}

void jitops__tuned_abandon(jitops_runtime_t *runtime, const jitops__tuned *tuned) {
  if (runtime->store != NULL && tuned->claimed)
    jitops__store_unclaim(runtime->store, tuned->key);
}

bool jitops__tuning_allowed(jitops_runtime_t *runtime, void *stream) {
  if (!jitops__env_tuning())
    return false;
  if (runtime->context == NULL)
    return false;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (runtime->driver->cuStreamIsCapturing((CUstream)stream, &capture) != CUDA_SUCCESS)
    return false;
  return capture == CU_STREAM_CAPTURE_STATUS_NONE;
}

/* ---- timing ------------------------------------------------------------------------------ */

typedef struct trial_clock {
  const jitops__driver *d;
  CUstream stream;
  CUevent start, stop;
} trial_clock;

/* The median of `reps` runs would be steadier, but the candidates differ by more than the
 * noise wherever the choice matters; the minimum is what each can do when undisturbed. */
static jitops_status time_one(trial_clock *c, int reps, jitops_status (*run)(void *, int),
                              void *ctx, int index, float *ms) {
  JITOPS__TRY(run(ctx, index)); /* warm-up: first-use costs stay out of the time */
  *ms = 0;
  for (int r = 0; r < reps; ++r) {
    CUresult e = c->d->cuEventRecord(c->start, c->stream);
    jitops_status s = e == CUDA_SUCCESS ? run(ctx, index) : JITOPS_ERR_DRIVER;
    if (s == JITOPS_SUCCESS)
      e = c->d->cuEventRecord(c->stop, c->stream);
    if (s == JITOPS_SUCCESS && e == CUDA_SUCCESS)
      e = c->d->cuEventSynchronize(c->stop);
    float t = 0;
    if (s == JITOPS_SUCCESS && e == CUDA_SUCCESS)
      e = c->d->cuEventElapsedTime(&t, c->start, c->stop);
    if (s != JITOPS_SUCCESS)
      return s;
    if (e != CUDA_SUCCESS)
      return jitops__driver_fail(c->d, e, "timing a candidate");
    if (r == 0 || t < *ms)
      *ms = t;
  }
  return JITOPS_SUCCESS;
}

static jitops_status time_all(trial_clock *c, int count, int reps,
                              jitops_status (*run)(void *, int), void *ctx, int *best) {
  jitops_status first_failure = JITOPS_SUCCESS;
  float best_ms = 0;
  *best = -1;
  for (int i = 0; i < count; ++i) {
    float ms;
    jitops_status s = time_one(c, reps, run, ctx, i, &ms);
    if (s != JITOPS_SUCCESS) {
      if (first_failure == JITOPS_SUCCESS)
        first_failure = s;
      continue;
    }
    jitops__log(JITOPS__LOG_DEBUG, "tuning: candidate %d of %d: %.4f ms", i, count, (double)ms);
    if (*best < 0 || ms < best_ms) {
      best_ms = ms;
      *best = i;
    }
  }
  return *best >= 0 ? JITOPS_SUCCESS : first_failure;
}

jitops_status jitops__time_candidates(jitops_runtime_t *runtime, void *stream, int count, int reps,
                                      jitops_status (*run)(void *ctx, int index), void *ctx,
                                      int *best) {
  const jitops__driver *d = runtime->driver;
  trial_clock c = {d, (CUstream)stream, NULL, NULL};
  CUresult e = d->cuStreamSynchronize(c.stream); /* earlier work must not count */
  if (e == CUDA_SUCCESS)
    e = d->cuEventCreate(&c.start, CU_EVENT_DEFAULT);
  if (e == CUDA_SUCCESS)
    e = d->cuEventCreate(&c.stop, CU_EVENT_DEFAULT);
  jitops_status status = e == CUDA_SUCCESS ? time_all(&c, count, reps, run, ctx, best)
                                           : jitops__driver_fail(d, e, "preparing to time");
  if (c.start != NULL)
    d->cuEventDestroy(c.start);
  if (c.stop != NULL)
    d->cuEventDestroy(c.stop);
  return status;
}
