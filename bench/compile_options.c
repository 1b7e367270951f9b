/* NVRTC compile time of the example template under candidate option sets, to choose the
 * library's defaults (runtime/compiler.c). CPU only: NVRTC needs no GPU. Each set compiles
 * the same instance REPEAT times; the table shows the median. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/compiler.h"
#include "runtime/sources.h"

enum { REPEAT = 9, MAX_OPTIONS = 8 };

typedef struct option_set {
  const char *label;
  const char *options[MAX_OPTIONS];
} option_set;

static const option_set sets[] = {
    {"-std=c++17 (baseline)", {"-std=c++17"}},
    {"-std=c++17 -minimal", {"-std=c++17", "-minimal"}},
    {"-std=c++17 -minimal -default-device", {"-std=c++17", "-minimal", "-default-device"}},
    {"-std=c++17 -minimal -no-source-include", {"-std=c++17", "-minimal", "-no-source-include"}},
    {"-std=c++17 -minimal -dopt=on", {"-std=c++17", "-minimal", "-dopt=on"}},
    {"-std=c++17 -minimal -Ofc=max", {"-std=c++17", "-minimal", "-Ofc=max"}},
    {"-std=c++17 -minimal -default-device -no-source-include",
     {"-std=c++17", "-minimal", "-default-device", "-no-source-include"}},
    {"-std=c++17 -minimal -lineinfo", {"-std=c++17", "-minimal", "-lineinfo"}},
    {"-std=c++14 -minimal", {"-std=c++14", "-minimal"}},
};

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int count(const option_set *set) {
  int n = 0;
  while (n < MAX_OPTIONS && set->options[n] != NULL)
    ++n;
  return n;
}

int main(int argc, char **argv) {
  const char *expr = argc > 2 ? argv[2] : "jitops::example_axpy<float, 4>";
  const char *source = argc > 1 ? argv[1] : "jitops/example.cuh";
  jitops__source_set sources;
  jitops__sources_init(&sources);
  const jitops__source **closure = NULL;
  size_t closure_count = 0;
  jitops__key hash;
  if (jitops__sources_closure(&sources, source, &closure, &closure_count, &hash) != 0) {
    fprintf(stderr, "%s\n", jitops_last_error());
    return 1;
  }
  printf("NVRTC %d, %s from %s, sm_90, median of %d compiles\n", jitops__nvrtc_version(), expr,
         source, REPEAT);
  /* Round-robin over the sets, so that machine noise spreads evenly over them. */
  enum { SETS = sizeof sets / sizeof sets[0] };
  double times[SETS][REPEAT];
  size_t bytes[SETS] = {0};
  int failed[SETS] = {0};
  for (int r = 0; r < REPEAT; ++r)
    for (size_t s = 0; s < SETS; ++s) {
      const char *options[MAX_OPTIONS + 1];
      int n = count(&sets[s]);
      memcpy(options, sets[s].options, (size_t)n * sizeof *options);
      options[n++] = "--gpu-architecture=sm_90";
      jitops__compiled out;
      times[s][r] = 0;
      if (failed[s] || jitops__compile(closure, closure_count, expr, options, (size_t)n, &out)) {
        failed[s] = 1;
        continue;
      }
      times[s][r] = out.compile_ms;
      bytes[s] = out.size;
      jitops__compiled_free(&out);
    }
  printf("| options | compile ms | CUBIN bytes |\n|---|---|---|\n");
  for (size_t s = 0; s < SETS; ++s) {
    if (failed[s]) {
      printf("| %s | failed | |\n", sets[s].label);
      continue;
    }
    qsort(times[s], REPEAT, sizeof times[s][0], compare);
    printf("| %s | %.1f | %zu |\n", sets[s].label, times[s][REPEAT / 2], bytes[s]);
  }
  free(closure);
  jitops__sources_free(&sources);
  return 0;
}
