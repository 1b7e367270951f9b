/* Links the installed library and compiles the example kernel on a compile-only runtime. */
#include <jitops/jitops.h>
#include <stdio.h>

int main(void) {
  jitops_runtime_config cfg;
  jitops_runtime_config_init(&cfg);
  cfg.device = -1;
  cfg.arch = "sm_90";
  cfg.cache_mode = JITOPS_CACHE_MODE_OFF;
  jitops_runtime_t *rt = NULL;
  jitops_kernel_t *k = NULL;
  if (jitops_runtime_create(&cfg, &rt) != JITOPS_SUCCESS ||
      jitops_kernel_get(rt, "jitops/example.cuh", "jitops::example_axpy<float, 1>", NULL, 0, &k) !=
          JITOPS_SUCCESS) {
    fprintf(stderr, "consumer: %s\n", jitops_last_error());
    return 1;
  }
  printf("consumer: libjitops %s compiled %s\n", jitops_version_string(),
         jitops_kernel_lowered_name(k));
  jitops_runtime_destroy(rt);
  return 0;
}
