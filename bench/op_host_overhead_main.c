/* op_host_overhead.c as a program of its own: the median host time of each op's call, over
 * CALLS calls after WARMUP. Prints a header line, then "result <op> <median ns per call>" per op.
 * Exits 77 without a GPU, 1 when a call fails. */
#include <stdio.h>
#include <stdlib.h>

#include <jitops/jitops.h>

#include "op_host_overhead.h"

enum { WARMUP = 200, CALLS = 2000, BATCH = 100 };

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(void) {
  int status = ohc_open();
  if (status != 0) {
    printf("op_host_overhead: %s%s\n", status == 77 ? "skipped, " : "", ohc_error());
    return status;
  }
  printf("device %s, libjitops %s, %d calls per op\n", ohc_device(), jitops_version_string(),
         CALLS);
  static double samples[CALLS];
  for (int op = 0; op < ohc_op_count(); ++op) {
    if (ohc_time(op, WARMUP, CALLS, BATCH, samples) != 0) {
      fprintf(stderr, "op_host_overhead: %s\n", ohc_error());
      ohc_close();
      return 1;
    }
    qsort(samples, CALLS, sizeof *samples, compare);
    printf("result %s %.0f\n", ohc_op_name(op), samples[CALLS / 2]);
  }
  ohc_close();
  return 0;
}
