/* CTC test reference, in double precision, shared by the GPU test and the CPU emulation test:
 * random problems (log_softmax rows, lengths with 0 and the maximum, repeated labels) and the
 * forward (alpha), backward (beta), loss and exact gradient, written plainly from the
 * definitions with true -inf. C and C++. */
#ifndef JITOPS_TESTS_CTC_REFERENCE_H
#define JITOPS_TESTS_CTC_REFERENCE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jitops/ctc.h"
#include "testutil.h"

/* ---- the problem and its reference ------------------------------------------------------- */

typedef struct ctc_case {
  int T, N, C, S, blank;
  int *in_len, *tl, *labels; /* labels [N][S], used for j < tl */
  double *lp;                /* [T][N][C], as stored on the device (after rounding) */
} ctc_case;

static inline void case_free(ctc_case *c) {
  free(c->in_len);
  free(c->tl);
  free(c->labels);
  free(c->lp);
  memset(c, 0, sizeof *c);
}

#define LP(c, t, n, k) ((c)->lp[((size_t)(t) * (c)->N + (n)) * (c)->C + (k)])

/* Random log_softmax rows; lengths include 0 and the maximum; labels repeat often when
 * `repeats`; some targets are longer than their inputs allow. */
static inline ctc_case make_case(uint64_t seed, int T, int N, int C, int S, int blank,
                                 int repeats) {
  ctc_case c;
  memset(&c, 0, sizeof c);
  c.T = T;
  c.N = N;
  c.C = C;
  c.S = S;
  c.blank = blank;
  c.in_len = (int *)calloc((size_t)N + 1, sizeof(int));
  c.tl = (int *)calloc((size_t)N + 1, sizeof(int));
  c.labels = (int *)calloc((size_t)N * S + 1, sizeof(int));
  c.lp = (double *)calloc((size_t)T * N * C + 1, sizeof(double));
  uint64_t r = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int t = 0; t < T; ++t)
    for (int n = 0; n < N; ++n) {
      double m = -INFINITY, sum = 0;
      for (int k = 0; k < C; ++k) {
        double v = test_rand_uniform(&r, -3, 3);
        LP(&c, t, n, k) = v;
        m = v > m ? v : m;
      }
      for (int k = 0; k < C; ++k)
        sum += exp(LP(&c, t, n, k) - m);
      for (int k = 0; k < C; ++k)
        LP(&c, t, n, k) -= m + log(sum);
    }
  for (int n = 0; n < N; ++n) {
    int pick = (int)(test_rand_u64(&r) % 8);
    c.in_len[n] = pick == 0 ? T : pick == 1 ? 0 : (int)(test_rand_u64(&r) % (T + 1));
    pick = (int)(test_rand_u64(&r) % 8);
    c.tl[n] = pick == 0 ? S : pick == 1 ? 0 : (int)(test_rand_u64(&r) % (S + 1));
    for (int j = 0; j < S; ++j) {
      int label = (int)(test_rand_u64(&r) % (uint64_t)(C - 1)); /* [0, C) without blank */
      if (label >= blank)
        ++label;
      if (repeats && j > 0 && test_rand_u64(&r) % 3 == 0)
        label = c.labels[n * S + j - 1];
      c.labels[n * S + j] = label;
    }
  }
  return c;
}

static inline double lae(double a, double b) {
  double m = a > b ? a : b;
  if (m == -INFINITY)
    return m;
  return m + log1p(exp(-fabs(a - b)));
}

/* alpha/beta [T][L] (natural logs, -inf outside); returns nll. */
static inline double ref_alpha_beta(const ctc_case *c, int n, double *alpha, double *beta) {
  int T = c->in_len[n], tl = c->tl[n], L = 2 * tl + 1;
  const int *lab = c->labels + (size_t)n * c->S;
#define CLS(s)  ((s) % 2 ? lab[((s)-1) / 2] : c->blank)
#define SKIP(s) ((s) % 2 && (s) >= 3 && lab[((s)-1) / 2] != lab[((s)-3) / 2])
  for (int i = 0; i < c->T * L; ++i)
    alpha[i] = beta[i] = -INFINITY;
  if (T == 0)
    return tl == 0 ? 0.0 : INFINITY;
  alpha[0] = LP(c, 0, n, c->blank);
  if (L > 1)
    alpha[1] = LP(c, 0, n, CLS(1));
  for (int t = 1; t < T; ++t)
    for (int s = 0; s < L; ++s) {
      double v = alpha[(t - 1) * L + s];
      if (s >= 1)
        v = lae(v, alpha[(t - 1) * L + s - 1]);
      if (SKIP(s))
        v = lae(v, alpha[(t - 1) * L + s - 2]);
      alpha[t * L + s] = v == -INFINITY ? v : v + LP(c, t, n, CLS(s));
    }
  beta[(T - 1) * L + L - 1] = LP(c, T - 1, n, c->blank);
  if (L > 1)
    beta[(T - 1) * L + L - 2] = LP(c, T - 1, n, CLS(L - 2));
  for (int t = T - 2; t >= 0; --t)
    for (int s = 0; s < L; ++s) {
      double v = beta[(t + 1) * L + s];
      if (s + 1 < L)
        v = lae(v, beta[(t + 1) * L + s + 1]);
      if (s + 2 < L && SKIP(s + 2))
        v = lae(v, beta[(t + 1) * L + s + 2]);
      beta[t * L + s] = v == -INFINITY ? v : v + LP(c, t, n, CLS(s));
    }
  double last = alpha[(T - 1) * L + L - 1];
  if (L > 1)
    last = lae(last, alpha[(T - 1) * L + L - 2]);
  return -last;
}

typedef struct ref_out {
  double *nll;  /* [N] */
  double *grad; /* [T][N][C], d nll_n / d lp (exact), per unit upstream gradient */
} ref_out;

static inline ref_out reference(const ctc_case *c) {
  ref_out r;
  r.nll = (double *)calloc((size_t)c->N + 1, sizeof(double));
  r.grad = (double *)calloc((size_t)c->T * c->N * c->C + 1, sizeof(double));
  size_t L = 2 * (size_t)c->S + 1;
  double *alpha = (double *)malloc(sizeof(double) * (c->T * L + 1));
  double *beta = (double *)malloc(sizeof(double) * (c->T * L + 1));
  double *bins = (double *)malloc(sizeof(double) * ((size_t)c->C + 1));
  for (int n = 0; n < c->N; ++n) {
    double nll = ref_alpha_beta(c, n, alpha, beta);
    r.nll[n] = nll;
    int Ln = 2 * c->tl[n] + 1;
    const int *lab = c->labels + (size_t)n * c->S;
    for (int t = 0; t < c->in_len[n]; ++t) {
      for (int k = 0; k < c->C; ++k)
        bins[k] = -INFINITY;
      for (int s = 0; s < Ln; ++s) {
        int k = s % 2 ? lab[(s - 1) / 2] : c->blank;
        bins[k] = lae(bins[k], alpha[t * Ln + s] + beta[t * Ln + s]);
      }
      for (int k = 0; k < c->C; ++k) {
        /* isinf(nll): NaN, as PyTorch (zero_infinity is the caller's business). */
        double acc = bins[k];
        double gam = isinf(nll) ? NAN : acc == -INFINITY ? 0.0 : exp(acc + nll - LP(c, t, n, k));
        r.grad[((size_t)t * c->N + n) * c->C + k] = -gam;
      }
    }
  }
  free(alpha);
  free(beta);
  free(bins);
  return r;
}

static inline void ref_free(ref_out *r) {
  free(r->nll);
  free(r->grad);
}

/* The expected loss output. */
static inline double expected_loss(const ctc_case *c, const ref_out *r, int reduction, int zinf,
                                   int n) {
  double v = r->nll[n];
  if (zinf && isinf(v))
    v = 0;
  if (reduction == JITOPS_CTC_REDUCTION_NONE)
    return v;
  double sum = 0;
  for (int i = 0; i < c->N; ++i) {
    double w = r->nll[i];
    if (zinf && isinf(w))
      w = 0;
    if (reduction == JITOPS_CTC_REDUCTION_MEAN)
      w /= c->tl[i] > 1 ? c->tl[i] : 1;
    sum += w;
  }
  return reduction == JITOPS_CTC_REDUCTION_MEAN ? sum / c->N : sum;
}

static inline double expected_grad(const ctc_case *c, const ref_out *r, int reduction, int zinf,
                                   int torch, const double *g, int t, int n, int k) {
  if (t >= c->in_len[n])
    return 0;
  if (isinf(r->nll[n]))
    return zinf ? 0 : NAN;
  double gn = reduction == JITOPS_CTC_REDUCTION_NONE ? g[n] : g[0];
  if (reduction == JITOPS_CTC_REDUCTION_MEAN)
    gn = gn / (c->tl[n] > 1 ? c->tl[n] : 1) / c->N;
  double v = gn * r->grad[((size_t)t * c->N + n) * c->C + k];
  if (torch)
    v += gn * exp(LP(c, t, n, k));
  return v;
}

static inline int close_to(double got, double want, double atol, double rtol) {
  if (isnan(want))
    return isnan(got);
  if (isinf(want))
    return got == want;
  return fabs(got - want) <= atol + rtol * fabs(want);
}

#endif
