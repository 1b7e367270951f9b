/* Which cuBLASLt algorithm runs a GEMM: the runtime's handle, the algorithm cache, the
 * heuristic and the timed choice; and the cublasLtMatmul call itself, which timing repeats.
 *
 * Shapes a process runs are few (each chunk size of each op, a handful of GEMMs each). When
 * more appear, the oldest entries are replaced; a replaced shape finds its timed algorithm
 * on disk again (or asks the heuristic again), so results stay the same.
 *
 * Algorithm choice. The heuristic's first algorithm is up to 30% slower than the best of
 * its first eight at the op's shapes (bench/flce_gemm_probe.c, NOTES-flce.md), so a new
 * shape times those eight on the caller's operands and keeps the fastest, once per machine:
 * the choice is stored in the kernel cache (jitops__tuned_*), so every later call, in this
 * process and the next, runs the same algorithm and gets the same bits. Accumulating GEMMs
 * (beta = 1) are not timed, since each trial would add into C; they, calls made while the
 * stream is captured into a graph, and JITOPS_TUNE=0 take the heuristic's first algorithm. */
#include "ops/flce/gemm_algo.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ALGO_CACHE_ENTRIES = 256, TUNE_CANDIDATES = 8, TUNE_REPS = 2 };

/* Everything the algorithm choice depends on. Built with memset so that padding compares. */
typedef struct gemm_key {
  int64_t m, n, k, lda, ldb, ldc;
  int32_t trans_a, trans_b, ab_dtype, c_dtype;
  uint32_t align_a, align_b, align_c, accumulate;
  uint64_t workspace_bytes;
} gemm_key;

/* What a stored choice is keyed by: the key and the library that ran the candidates. */
typedef struct tuned_id {
  gemm_key key;
  uint64_t cublaslt_version;
} tuned_id;

typedef struct algo_entry {
  gemm_key key;
  cublasLtMatmulAlgo_t algo;
  bool used;
} algo_entry;

typedef struct blaslt_state {
  cublasLtHandle_t handle;
  pthread_mutex_t lock;
  size_t next; /* the entry the next new shape replaces */
  algo_entry entries[ALGO_CACHE_ENTRIES];
} blaslt_state;

jitops_status jitops__flce_blas_fail(cublasStatus_t status, const char *what) {
  jitops_status code = status == CUBLAS_STATUS_ALLOC_FAILED    ? JITOPS_ERR_OUT_OF_MEMORY
                       : status == CUBLAS_STATUS_NOT_SUPPORTED ? JITOPS_ERR_UNSUPPORTED
                                                               : JITOPS_ERR_DRIVER;
  return jitops__fail(code, "cuBLASLt: %s failed: %s (%s)", what, cublasLtGetStatusName(status),
                      cublasLtGetStatusString(status));
}

/* ---- the runtime's state --------------------------------------------------------------------- */

static jitops_status state_create(jitops_runtime_t *runtime, void **out) {
  (void)runtime;
  blaslt_state *state = calloc(1, sizeof *state);
  if (state == NULL)
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "cuBLASLt: no memory for the runtime's state");
  cublasStatus_t status = cublasLtCreate(&state->handle);
  if (status != CUBLAS_STATUS_SUCCESS) {
    free(state);
    return jitops__flce_blas_fail(status, "cublasLtCreate");
  }
  pthread_mutex_init(&state->lock, NULL);
  *out = state;
  return JITOPS_SUCCESS;
}

static void state_destroy(jitops_runtime_t *runtime, void *opaque) {
  (void)runtime;
  blaslt_state *state = opaque;
  if (state == NULL)
    return;
  cublasLtDestroy(state->handle);
  pthread_mutex_destroy(&state->lock);
  free(state);
}

/* The largest power of two (at most 256) that divides the address: what the algorithm may
 * assume about the pointer. */
static uint32_t alignment_of(const void *ptr) {
  uintptr_t p = (uintptr_t)ptr;
  if (p == 0)
    return 256;
  uintptr_t a = p & (~p + 1);
  return a > 256 ? 256 : (uint32_t)a;
}

static gemm_key make_key(const jitops__flce_matmul *m) {
  gemm_key key;
  memset(&key, 0, sizeof key);
  key.m = m->m;
  key.n = m->n;
  key.k = m->k;
  key.lda = m->lda;
  key.ldb = m->ldb;
  key.ldc = m->ldc;
  key.trans_a = m->trans_a;
  key.trans_b = m->trans_b;
  key.ab_dtype = (int32_t)m->ab_dtype;
  key.c_dtype = (int32_t)m->c_dtype;
  key.align_a = alignment_of(m->a);
  key.align_b = alignment_of(m->b);
  key.align_c = alignment_of(m->c);
  key.accumulate = m->accumulate;
  key.workspace_bytes = m->workspace_bytes;
  return key;
}

/* One GEMM as the caller asked for it; candidates run on exactly these operands. */
typedef struct gemm_call {
  jitops_runtime_t *runtime;
  blaslt_state *state;
  const jitops__flce_matmul *m;
  const gemm_key *key;
  const cublasLtMatmulHeuristicResult_t *candidates; /* while timing */
} gemm_call;

/* ---- the heuristic --------------------------------------------------------------------------- */

/* Up to `max` algorithms in the heuristic's order into results[], their number in *found. */
static jitops_status ask_heuristic(const gemm_call *c, int max,
                                   cublasLtMatmulHeuristicResult_t *results, int *found) {
  const gemm_key *key = c->key;
  const jitops__flce_matmul *m = c->m;
  cublasLtMatmulPreference_t pref;
  cublasStatus_t s = cublasLtMatmulPreferenceCreate(&pref);
  if (s != CUBLAS_STATUS_SUCCESS)
    return jitops__flce_blas_fail(s, "cublasLtMatmulPreferenceCreate");
  uint64_t ws = key->workspace_bytes;
  /* Split-K partial sums stay in the compute type (f32): rounding them to a 16-bit output
   * type in place would lose the precision the accumulation is for. */
  uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  const struct {
    cublasLtMatmulPreferenceAttributes_t attribute;
    const void *value;
    size_t size;
  } prefs[] = {
      {CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws},
      {CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &key->align_a, sizeof key->align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &key->align_b, sizeof key->align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &key->align_c, sizeof key->align_c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &key->align_c, sizeof key->align_c},
  };
  for (size_t i = 0; s == CUBLAS_STATUS_SUCCESS && i < sizeof prefs / sizeof prefs[0]; ++i)
    s = cublasLtMatmulPreferenceSetAttribute(pref, prefs[i].attribute, prefs[i].value,
                                             prefs[i].size);
  *found = 0;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulAlgoGetHeuristic(c->state->handle, m->op, m->a_desc, m->b_desc, m->c_desc,
                                       m->c_desc, pref, max, results, found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED)
    return jitops__flce_blas_fail(s, "cublasLtMatmulAlgoGetHeuristic");
  int usable = 0; /* failed entries dropped, order kept */
  for (int i = 0; s == CUBLAS_STATUS_SUCCESS && i < *found; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS)
      results[usable++] = results[i];
  *found = usable;
  if (usable < 1)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED,
                        "cuBLASLt: no algorithm for a %lld x %lld x %lld GEMM (lda %lld, ldb "
                        "%lld, ldc %lld, alignments %u/%u/%u bytes)",
                        (long long)key->m, (long long)key->n, (long long)key->k,
                        (long long)key->lda, (long long)key->ldb, (long long)key->ldc, key->align_a,
                        key->align_b, key->align_c);
  return JITOPS_SUCCESS;
}

static jitops_status matmul(const gemm_call *c, const cublasLtMatmulAlgo_t *algo) {
  const jitops__flce_matmul *m = c->m;
  cublasStatus_t s = cublasLtMatmul(c->state->handle, m->op, m->alpha, m->a, m->a_desc, m->b,
                                    m->b_desc, m->beta, m->c, m->c_desc, m->c, m->c_desc, algo,
                                    m->workspace, m->workspace_bytes, (cudaStream_t)m->stream);
  return s == CUBLAS_STATUS_SUCCESS ? JITOPS_SUCCESS : jitops__flce_blas_fail(s, "cublasLtMatmul");
}

/* ---- the timed choice ------------------------------------------------------------------------ */

static jitops_status run_candidate(void *ctx, int index) {
  const gemm_call *c = ctx;
  return matmul(c, &c->candidates[index].algo);
}

/* A stored algorithm still suits these descriptors (a newer cuBLASLt has its own key, but a
 * damaged or foreign row must not reach cublasLtMatmul). */
static bool algo_usable(const gemm_call *c, const cublasLtMatmulAlgo_t *algo) {
  const jitops__flce_matmul *m = c->m;
  cublasLtMatmulHeuristicResult_t check;
  return cublasLtMatmulAlgoCheck(c->state->handle, m->op, m->a_desc, m->b_desc, m->c_desc,
                                 m->c_desc, algo, &check) == CUBLAS_STATUS_SUCCESS &&
         check.state == CUBLAS_STATUS_SUCCESS && check.workspaceSize <= m->workspace_bytes;
}

static void describe_gemm(const gemm_key *key, char *out, size_t size) {
  snprintf(out, size, "cuBLASLt algorithm: %lld x %lld x %lld, op %c%c, lda %lld ldb %lld ldc %lld",
           (long long)key->m, (long long)key->n, (long long)key->k, key->trans_a ? 'T' : 'N',
           key->trans_b ? 'T' : 'N', (long long)key->lda, (long long)key->ldb, (long long)key->ldc);
}

/* The fastest of the heuristic's first candidates, timed now and stored for later calls. */
static jitops_status tune(const gemm_call *c, cublasLtMatmulAlgo_t *algo) {
  tuned_id id;
  memset(&id, 0, sizeof id);
  id.key = *c->key;
  id.cublaslt_version = cublasLtGetVersion();
  jitops__tuned tuned;
  if (jitops__tuned_get(c->runtime, "cublaslt-algo", &id, sizeof id, algo, sizeof *algo, &tuned) &&
      algo_usable(c, algo))
    return JITOPS_SUCCESS;
  cublasLtMatmulHeuristicResult_t candidates[TUNE_CANDIDATES];
  int found = 0, best = 0;
  jitops_status status = ask_heuristic(c, TUNE_CANDIDATES, candidates, &found);
  gemm_call timed = *c;
  timed.candidates = candidates;
  if (status == JITOPS_SUCCESS && found > 1)
    status = jitops__time_candidates(c->runtime, c->m->stream, found, TUNE_REPS, run_candidate,
                                     &timed, &best);
  if (status != JITOPS_SUCCESS) {
    jitops__tuned_abandon(c->runtime, &tuned);
    return status;
  }
  *algo = candidates[best].algo;
  char description[160];
  describe_gemm(c->key, description, sizeof description);
  jitops__tuned_put(c->runtime, &tuned, "flce", description, algo, sizeof *algo);
  return JITOPS_SUCCESS;
}

static jitops_status choose_algo(const gemm_call *c, cublasLtMatmulAlgo_t *algo) {
  if (!c->key->accumulate && jitops__tuning_allowed(c->runtime, c->m->stream))
    return tune(c, algo);
  cublasLtMatmulHeuristicResult_t first;
  int found = 0;
  JITOPS__TRY(ask_heuristic(c, 1, &first, &found));
  *algo = first.algo;
  return JITOPS_SUCCESS;
}

/* The cached algorithm for the call's key, choosing it (under the lock, so a shape is
 * chosen once per process) when it is new. */
static jitops_status find_algo(const gemm_call *c, cublasLtMatmulAlgo_t *algo) {
  blaslt_state *state = c->state;
  pthread_mutex_lock(&state->lock);
  for (size_t i = 0; i < ALGO_CACHE_ENTRIES; ++i) {
    algo_entry *e = &state->entries[i];
    if (e->used && memcmp(&e->key, c->key, sizeof *c->key) == 0) {
      *algo = e->algo;
      pthread_mutex_unlock(&state->lock);
      return JITOPS_SUCCESS;
    }
  }
  jitops_status status = choose_algo(c, algo);
  if (status == JITOPS_SUCCESS) {
    algo_entry *e = &state->entries[state->next];
    state->next = (state->next + 1) % ALGO_CACHE_ENTRIES;
    e->key = *c->key;
    e->algo = *algo;
    e->used = true;
  }
  pthread_mutex_unlock(&state->lock);
  return status;
}

jitops_status jitops__flce_matmul_run(jitops_runtime_t *runtime, const jitops__flce_matmul *m) {
  void *opaque = NULL;
  JITOPS__TRY(
      jitops__runtime_state(runtime, JITOPS__SLOT_CUBLASLT, state_create, state_destroy, &opaque));
  gemm_key key = make_key(m);
  gemm_call call = {runtime, opaque, m, &key, NULL};
  cublasLtMatmulAlgo_t algo;
  JITOPS__TRY(find_algo(&call, &algo));
  return matmul(&call, &algo);
}
