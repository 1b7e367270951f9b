/* The scans' share of the prewarm catalogue (ops/catalogue_family.h). */
#include <stdbool.h>
#include <string.h>

#include "ops/catalogue_family.h"
#include "ops/scan/plan.h"

/* The layouts most calls collapse to: a contiguous matrix scanned along its rows (rows
 * kernel, one batch dimension; many short rows walk in chunks of 4 or 8 positions a lane) or
 * along its columns (cols kernel with look-back, one batch dimension), and one long axis, alone
 * or in a few rows (rows kernel with look-back, no or one batch dimension, its wide tiles where
 * the op has them; a one-tile row is a narrow tile), for f32 and bf16. (A cumsum backward is a
 * cumsum.) */
typedef struct catalogue_layout {
  jitops__scan_kind kind;
  int nb;
  int lookback;
  jitops__scan_width width;
  int items; /* the walk's positions a lane; 0: the op's usual */
} catalogue_layout;

static const catalogue_layout layouts[] = {{JITOPS__SCAN_ROWS, 1, 0, JITOPS__SCAN_NARROW, 0},
                                           {JITOPS__SCAN_ROWS, 1, 0, JITOPS__SCAN_NARROW, 4},
                                           {JITOPS__SCAN_ROWS, 1, 0, JITOPS__SCAN_NARROW, 8},
                                           {JITOPS__SCAN_COLS, 1, 1, JITOPS__SCAN_NARROW, 0},
                                           {JITOPS__SCAN_ROWS, 0, 1, JITOPS__SCAN_NARROW, 0},
                                           {JITOPS__SCAN_ROWS, 1, 1, JITOPS__SCAN_NARROW, 0},
                                           {JITOPS__SCAN_ROWS, 0, 1, JITOPS__SCAN_WIDE, 0},
                                           {JITOPS__SCAN_ROWS, 1, 1, JITOPS__SCAN_WIDE, 0}};
static const jitops__scan_kop catalogue_kops[] = {
    JITOPS__SCAN_K_CUMSUM,       JITOPS__SCAN_K_CUMPROD, JITOPS__SCAN_K_CUMMAX,
    JITOPS__SCAN_K_CUMMIN,       JITOPS__SCAN_K_LCSE,    JITOPS__SCAN_K_CUMPROD_BWD,
    JITOPS__SCAN_K_EXTREMUM_BWD, JITOPS__SCAN_K_LCSE_BWD};
static const jitops__dtype catalogue_dtypes[] = {JITOPS__DTYPE_F32, JITOPS__DTYPE_BF16};

enum {
  N_LAYOUTS = sizeof layouts / sizeof layouts[0],
  N_KOPS = sizeof catalogue_kops / sizeof catalogue_kops[0],
  N_DTYPES = sizeof catalogue_dtypes / sizeof catalogue_dtypes[0],
  N_GRID = N_LAYOUTS * N_KOPS * N_DTYPES
};

/* The (layout, kop, dtype) combinations of the catalogue, in order: a wide layout only where
 * the op has wide tiles, and a walk of fewer positions a lane only where that is not the op's
 * usual (elsewhere each names the kernel another entry already lists). */
static bool listed(const catalogue_layout *l, jitops__scan_kop kop, jitops__dtype dtype) {
  if (l->width == JITOPS__SCAN_WIDE)
    return jitops__scan_rows_wide(kop, dtype);
  if (l->items == 0)
    return true;
  char name[256], usual[256];
  jitops__scan_kernel_name(kop, dtype, l->kind, l->nb, l->lookback, l->width, l->items, name,
                           sizeof name);
  jitops__scan_kernel_name(kop, dtype, l->kind, l->nb, l->lookback, l->width, 0, usual,
                           sizeof usual);
  return strcmp(name, usual) != 0;
}

/* Entry i of the full grid (layout fastest, then dtype, then kop). */
static void grid_at(size_t i, const catalogue_layout **layout, jitops__scan_kop *kop,
                    jitops__dtype *dtype) {
  *layout = &layouts[i % N_LAYOUTS];
  *dtype = catalogue_dtypes[i / N_LAYOUTS % N_DTYPES];
  *kop = catalogue_kops[i / N_LAYOUTS / N_DTYPES];
}

/* The index-th listed combination; false past the end. */
static bool combination(size_t index, const catalogue_layout **layout, jitops__scan_kop *kop,
                        jitops__dtype *dtype) {
  for (size_t i = 0; i < (size_t)N_GRID; ++i) {
    grid_at(i, layout, kop, dtype);
    if (listed(*layout, *kop, *dtype) && index-- == 0)
      return true;
  }
  return false;
}

static size_t scan_count(void) {
  size_t n = 0;
  for (size_t i = 0; i < (size_t)N_GRID; ++i) {
    const catalogue_layout *l;
    jitops__scan_kop kop;
    jitops__dtype dtype;
    grid_at(i, &l, &kop, &dtype);
    n += listed(l, kop, dtype);
  }
  return n;
}

static void scan_entry(size_t index, char *buf, size_t size) {
  const catalogue_layout *l;
  jitops__scan_kop kop;
  jitops__dtype dtype;
  if (!combination(index, &l, &kop, &dtype)) {
    buf[0] = '\0';
    return;
  }
  jitops__scan_kernel_name(kop, dtype, l->kind, l->nb, l->lookback, l->width, l->items, buf, size);
}

const jitops__catalogue_family jitops__catalogue_scan = {"scan", scan_count,          NULL,
                                                         NULL,   JITOPS__SCAN_SOURCE, scan_entry};
