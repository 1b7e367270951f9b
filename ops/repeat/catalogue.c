/* Repeat's share of the prewarm catalogue (ops/catalogue_family.h). Forward: a matrix of 2- or
 * 4-byte elements repeated along both dimensions (vectorized), and a 4-byte vector. Backward:
 * f32 and bf16 on a matrix repeated along both dimensions. */
#include "ops/catalogue_family.h"
#include "ops/repeat/plan.h"

static const struct {
  size_t elem;
  int nb;
} fwd_entries[] = {{4, 1}, {2, 1}, {4, 0}};
static const jitops__dtype bwd_dtypes[] = {JITOPS__DTYPE_F32, JITOPS__DTYPE_BF16};
enum {
  N_FWD = sizeof fwd_entries / sizeof fwd_entries[0],
  N_BWD = sizeof bwd_dtypes / sizeof bwd_dtypes[0]
};

static size_t repeat_count(void) {
  return N_FWD + N_BWD;
}

/* 16-byte accesses (the widest vector), 32-bit indices. */
static void repeat_entry(size_t index, char *buf, size_t size) {
  if (index < N_FWD) {
    const size_t elem = fwd_entries[index].elem;
    jitops__repeat_fwd_name(elem, fwd_entries[index].nb, (int)(16 / elem), 0, buf, size);
  } else {
    const jitops__dtype dtype = bwd_dtypes[index - N_FWD];
    jitops__repeat_bwd_name(dtype, 2, (int)(16 / jitops__dtype_size(dtype)), 0, 0, buf, size);
  }
}

const jitops__catalogue_family jitops__catalogue_repeat = {
    "repeat", repeat_count, NULL, NULL, JITOPS__REPEAT_SOURCE, repeat_entry};
