#include "runtime/environment.h"

#include <pthread.h>

#include "cache/remote.h"
#include "cache/settings.h"
#include "common/env.h"
#include "common/log.h"

enum { SCRATCH_KEEP_DEFAULT = 256 << 20 };

int jitops__env_tuning(void) {
  return jitops__env_flag("JITOPS_TUNE", 1);
}

int jitops__env_dependent_launches(void) {
  return jitops__env_flag("JITOPS_DEPENDENT_LAUNCHES", 1);
}

uint64_t jitops__env_scratch_keep_bytes(void) {
  return (uint64_t)jitops__env_size("JITOPS_SCRATCH_KEEP_BYTES", SCRATCH_KEEP_DEFAULT,
                                    JITOPS__SIZE_ZERO_OR_MORE);
}

int jitops__env_quick_builds(void) {
  return jitops__env_flag("JITOPS_QUICK_BUILDS", 1);
}

static void check_all(void) {
  jitops__log_threshold();
  jitops__cache_mode_from_env();
  jitops__cache_max_bytes_from_env();
  jitops__env_tuning();
  jitops__env_dependent_launches();
  jitops__env_quick_builds();
  jitops__env_scratch_keep_bytes();
  jitops__remote_timeout_ms_from_env();
  jitops__remote_plan remote;
  jitops__remote_plan_make(NULL, NULL, &remote);
  jitops__remote_plan_warn(&remote);
}

void jitops__environment_check(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, check_all);
}
