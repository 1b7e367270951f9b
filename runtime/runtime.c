/* Runtime lifetime: configuration, the device and its primary context, the target, and the
 * tiers a kernel request goes through. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "runtime/context.h"
#include "runtime/environment.h"
#include "runtime/kernel_batch.h"
#include "runtime/runtime_internal.h"

static const char *const fn_create = "jitops_runtime_create";

void jitops_runtime_config_init(jitops_runtime_config *config) {
  if (config == NULL)
    return;
  memset(config, 0, sizeof *config);
  config->device = 0;
  config->cache_mode = JITOPS_CACHE_MODE_DEFAULT;
  config->shipped_cache = NULL;    /* $JITOPS_CACHE_SHIPPED */
  config->remote_cache = NULL;     /* $JITOPS_CACHE_REMOTE */
  config->remote_cache_key = NULL; /* $JITOPS_CACHE_REMOTE_KEY */
}

/* "sm_90" -> 90; 0 when malformed. */
static int parse_arch(const char *arch) {
  if (strncmp(arch, "sm_", 3) != 0)
    return 0;
  int value = 0;
  const char *p = arch + 3;
  if (*p == 0)
    return 0;
  for (; *p; ++p) {
    if (*p < '0' || *p > '9' || value > 10000)
      return 0;
    value = value * 10 + (*p - '0');
  }
  return value >= 10 ? value : 0;
}

/* Typical limits of an architecture, for choices made on a compile-only runtime. */
static void typical_props(int arch, jitops__device_props *p) {
  p->arch = arch;
  p->sm_count = 0;
  p->max_threads_per_block = 1024;
  p->smem_per_block = 48 * 1024;
  size_t optin_kib = 48;
  if (arch == 80 || arch == 87)
    optin_kib = 163;
  else if (arch == 90 || arch == 100 || arch == 103)
    optin_kib = 227;
  else if (arch >= 75)
    optin_kib = 99 - (arch == 75 ? 35 : 0);
  p->smem_per_block_optin = optin_kib * 1024;
  p->smem_per_sm = p->smem_per_block_optin + 1024;
  p->l2_bytes = (arch >= 90 ? 50 : 40) * (size_t)1 << 20;
}

static int attribute(jitops_runtime_t *rt, CUdevice_attribute which) {
  int value = 0;
  rt->driver->cuDeviceGetAttribute(&value, which, rt->cu_device);
  return value;
}

static void read_props(jitops_runtime_t *rt) {
  jitops__device_props *p = &rt->props;
  p->arch = 10 * attribute(rt, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) +
            attribute(rt, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  p->sm_count = attribute(rt, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  p->max_threads_per_block = attribute(rt, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  p->smem_per_block = (size_t)attribute(rt, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  p->smem_per_block_optin =
      (size_t)attribute(rt, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  p->smem_per_sm = (size_t)attribute(rt, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  p->l2_bytes = (size_t)attribute(rt, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
}

/* Programmatic dependent launches need sm_90 (griddepcontrol); captured into a graph they need
 * a driver for CUDA 12.3. */
enum { DEPENDENT_LAUNCH_MIN_ARCH = 90, DEPENDENT_LAUNCH_MIN_DRIVER = 12030 };

static int dependent_launches_usable(const jitops_runtime_t *rt) {
  if (!jitops__env_dependent_launches())
    return 0;
  int version = 0;
  if (rt->driver->cuDriverGetVersion(&version) != CUDA_SUCCESS)
    return 0;
  return rt->props.arch >= DEPENDENT_LAUNCH_MIN_ARCH && version >= DEPENDENT_LAUNCH_MIN_DRIVER;
}

static jitops_status open_device(jitops_runtime_t *rt, int device, int wanted_arch) {
  JITOPS__TRY(jitops__driver_get(&rt->driver));
  const jitops__driver *d = rt->driver;
  int count = 0;
  CUresult r = d->cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS)
    return jitops__driver_fail(d, r, "jitops_runtime_create: cuDeviceGetCount");
  if (device >= count)
    return jitops__fail(JITOPS_ERR_NO_DEVICE,
                        "%s: config.device %d does not exist (this machine has %d CUDA "
                        "device(s))",
                        fn_create, device, count);
  if ((r = d->cuDeviceGet(&rt->cu_device, device)) != CUDA_SUCCESS)
    return jitops__driver_fail(d, r, "jitops_runtime_create: cuDeviceGet");
  read_props(rt);
  rt->dependent_launches = dependent_launches_usable(rt);
  d->cuDeviceGetName(rt->device_name, (int)sizeof rt->device_name, rt->cu_device);
  if (wanted_arch != 0 && wanted_arch != rt->props.arch)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED,
                        "%s: config.arch sm_%d does not match device %d, which is sm_%d", fn_create,
                        wanted_arch, device, rt->props.arch);
  if ((r = d->cuDevicePrimaryCtxRetain(&rt->context, rt->cu_device)) != CUDA_SUCCESS) {
    rt->context = NULL;
    return jitops__driver_fail(d, r, "jitops_runtime_create: cuDevicePrimaryCtxRetain");
  }
  return JITOPS_SUCCESS;
}

static jitops_status check_config(const jitops_runtime_config *c, int *arch) {
  if (c->device < -1)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: config.device is %d; expected a device ordinal, or -1 for a "
                        "compile-only runtime",
                        fn_create, c->device);
  *arch = 0;
  if (c->arch != NULL && (*arch = parse_arch(c->arch)) == 0)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: config.arch \"%s\" is malformed; expected \"sm_XY\" such as "
                        "\"sm_90\"",
                        fn_create, c->arch);
  if (c->device == -1 && c->arch == NULL)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "%s: config.arch is NULL; a compile-only runtime (device -1) needs a "
                        "target such as \"sm_90\"",
                        fn_create);
  if ((unsigned)c->cache_mode > JITOPS_CACHE_MODE_OFF)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT, "%s: config.cache_mode %d is not a mode",
                        fn_create, (int)c->cache_mode);
  return JITOPS_SUCCESS;
}

static jitops_status init_tiers(jitops_runtime_t *rt, const jitops_runtime_config *c) {
  JITOPS__TRY(jitops__target_resolve(rt->props.arch, &rt->target));
  rt->nvrtc_version = jitops__nvrtc_version();
  JITOPS__TRY(jitops__sources_init(&rt->sources));
  JITOPS__TRY(jitops__registry_init(&rt->registry));
  jitops__store_options store_options = {c->cache_dir, c->cache_mode, c->cache_max_bytes,
                                         c->shipped_cache};
  rt->store = jitops__store_open(&store_options);
  rt->remote = jitops__remote_open(c->remote_cache, c->remote_cache_key);
  /* A fleet's remote tier serves full builds in milliseconds, and the quick builds a node made
   * would spread through it to the others: with one, cold calls build in full. */
  rt->quick_builds = jitops__env_quick_builds() && rt->nvrtc_version >= JITOPS__QUICK_MIN_NVRTC &&
                     rt->remote == NULL;
  jitops__log(JITOPS__LOG_DEBUG, "runtime for %s (%s): disk cache %s%s", rt->target.name,
              rt->device >= 0 ? rt->device_name : "compile-only",
              rt->store && jitops__store_path(rt->store)[0] ? jitops__store_path(rt->store) : "off",
              rt->store && !jitops__store_writable(rt->store) ? " (not written)" : "");
  return JITOPS_SUCCESS;
}

jitops_status jitops_runtime_create(const jitops_runtime_config *config, jitops_runtime_t **out) {
  JITOPS__REQUIRE_NONNULL(fn_create, out);
  *out = NULL;
  jitops__environment_check();
  jitops_runtime_config defaults;
  jitops_runtime_config_init(&defaults);
  const jitops_runtime_config *c = config ? config : &defaults;
  int arch = 0;
  JITOPS__TRY(check_config(c, &arch));
  jitops_runtime_t *rt = calloc(1, sizeof *rt);
  if (rt == NULL)
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn_create);
  rt->device = c->device;
  pthread_mutex_init(&rt->build_lock, NULL);
  pthread_cond_init(&rt->build_done, NULL);
  pthread_mutex_init(&rt->state_lock, NULL);
  jitops__background_init(&rt->background);
  jitops_status status = JITOPS_SUCCESS;
  if (c->device >= 0)
    status = open_device(rt, c->device, arch);
  else
    typical_props(arch, &rt->props);
  if (status == JITOPS_SUCCESS)
    status = init_tiers(rt, c);
  if (status != JITOPS_SUCCESS) {
    char message[1024];
    snprintf(message, sizeof message, "%s", jitops_last_error());
    jitops_runtime_destroy(rt);
    return jitops__fail(status, "%s", message);
  }
  *out = rt;
  return JITOPS_SUCCESS;
}

/* Gathers each kernel's usage for the disk tier. */
static void flush_usage(jitops_runtime_t *rt) {
  size_t capacity = jitops__registry_capacity(&rt->registry), n = 0;
  if (rt->store == NULL || capacity == 0)
    return;
  jitops__usage *usage = calloc(capacity, sizeof *usage);
  if (usage == NULL)
    return;
  for (size_t i = 0; i < capacity; ++i) {
    jitops_kernel_t *k = jitops__registry_at(&rt->registry, i);
    if (k == NULL || k->state != JITOPS__KERNEL_READY)
      continue;
    jitops__usage *u = &usage[n++];
    jitops__key_to_bytes(k->cache_key, u->key);
    u->op = k->op;
    u->target = rt->target.name;
    u->memory_hits = k->memory_hits;
    u->disk_hits = k->disk_hits;
    u->misses = k->misses;
    u->compiles = k->compiles;
    u->remote_hits = k->remote_hits;
    u->remote_misses = k->remote_misses;
    u->remote_errors = k->remote_errors;
  }
  jitops__store_flush(rt->store, usage, n);
  free(usage);
}

static void free_kernels(jitops_runtime_t *rt) {
  int pushed = 0;
  if (rt->context != NULL && jitops__context_push(rt, &pushed) != JITOPS_SUCCESS)
    pushed = -1;
  size_t capacity = jitops__registry_capacity(&rt->registry);
  for (size_t i = 0; i < capacity; ++i) {
    jitops_kernel_t *k = jitops__registry_at(&rt->registry, i);
    if (k == NULL)
      continue;
    if (k->module != NULL && pushed >= 0)
      rt->driver->cuModuleUnload(k->module);
    jitops__kernel_free(k);
  }
  if (pushed > 0)
    jitops__context_restore(rt, pushed);
}

void jitops_runtime_destroy(jitops_runtime_t *rt) {
  if (rt == NULL)
    return;
  jitops__background_destroy(&rt->background); /* its builds use everything below */
  if (rt->registry.slots != NULL) {
    flush_usage(rt);
    free_kernels(rt);
    jitops__registry_free(&rt->registry);
  }
  for (int slot = 0; slot < JITOPS__SLOT_COUNT; ++slot)
    if (rt->states[slot] != NULL && rt->state_destroy[slot] != NULL)
      rt->state_destroy[slot](rt, rt->states[slot]);
  jitops__store_close(rt->store);
  jitops__remote_close(rt->remote);
  if (rt->sources.items != NULL)
    jitops__sources_free(&rt->sources);
  if (rt->context != NULL)
    rt->driver->cuDevicePrimaryCtxRelease(rt->cu_device);
  pthread_mutex_destroy(&rt->build_lock);
  pthread_cond_destroy(&rt->build_done);
  pthread_mutex_destroy(&rt->state_lock);
  free(rt);
}

jitops_status jitops_runtime_get_info(const jitops_runtime_t *rt, jitops_runtime_info *out) {
  JITOPS__REQUIRE_NONNULL("jitops_runtime_get_info", rt);
  JITOPS__REQUIRE_NONNULL("jitops_runtime_get_info", out);
  memset(out, 0, sizeof *out);
  out->device = rt->device;
  out->has_device = rt->context != NULL;
  out->arch = rt->props.arch;
  out->nvrtc_version = rt->nvrtc_version;
  snprintf(out->arch_name, sizeof out->arch_name, "sm_%d", rt->props.arch);
  snprintf(out->device_name, sizeof out->device_name, "%s", rt->device_name);
  jitops__store_describe(rt->store, out);
  jitops__remote_describe(rt->remote, out);
  return JITOPS_SUCCESS;
}

jitops_status jitops_runtime_get_stats(const jitops_runtime_t *rt, jitops_stats *out) {
  JITOPS__REQUIRE_NONNULL("jitops_runtime_get_stats", rt);
  JITOPS__REQUIRE_NONNULL("jitops_runtime_get_stats", out);
  out->memory_hits = __atomic_load_n(&rt->memory_hits, __ATOMIC_RELAXED);
  out->disk_hits = __atomic_load_n(&rt->disk_hits, __ATOMIC_RELAXED);
  out->misses = __atomic_load_n(&rt->misses, __ATOMIC_RELAXED);
  out->compiles = __atomic_load_n(&rt->compiles, __ATOMIC_RELAXED);
  out->compile_errors = __atomic_load_n(&rt->compile_errors, __ATOMIC_RELAXED);
  out->waits = __atomic_load_n(&rt->waits, __ATOMIC_RELAXED);
  out->disk_errors = jitops__store_errors(rt->store);
  out->compile_ms = (double)__atomic_load_n(&rt->compile_us, __ATOMIC_RELAXED) / 1000.0;
  out->remote_hits = __atomic_load_n(&rt->remote_hits, __ATOMIC_RELAXED);
  out->remote_misses = __atomic_load_n(&rt->remote_misses, __ATOMIC_RELAXED);
  out->remote_errors = jitops__remote_errors(rt->remote);
  out->shared_hits = __atomic_load_n(&rt->shared_hits, __ATOMIC_RELAXED);
  out->quick_compiles = __atomic_load_n(&rt->quick_compiles, __ATOMIC_RELAXED);
  return JITOPS_SUCCESS;
}

jitops_status jitops_runtime_wait_builds(jitops_runtime_t *rt) {
  JITOPS__REQUIRE_NONNULL("jitops_runtime_wait_builds", rt);
  jitops__background_finish(&rt->background);
  return JITOPS_SUCCESS;
}

const jitops__device_props *jitops__runtime_props(const jitops_runtime_t *rt) {
  return &rt->props;
}

jitops_status jitops__runtime_state(jitops_runtime_t *rt, jitops__state_slot slot,
                                    jitops_status (*create)(jitops_runtime_t *, void **),
                                    void (*destroy)(jitops_runtime_t *, void *), void **out) {
  if ((unsigned)slot >= JITOPS__SLOT_COUNT)
    return jitops__fail(JITOPS_ERR_INTERNAL, "runtime state slot %d out of range", (int)slot);
  /* Ops ask on every call (the scratch pool, cuBLASLt's handle): once a slot is set it never
   * changes until the runtime is destroyed, so a set slot is read without the lock. */
  *out = __atomic_load_n(&rt->states[slot], __ATOMIC_ACQUIRE);
  if (*out != NULL)
    return JITOPS_SUCCESS;
  pthread_mutex_lock(&rt->state_lock);
  jitops_status status = JITOPS_SUCCESS;
  void *state = rt->states[slot];
  if (state == NULL) {
    status = create(rt, &state);
    if (status == JITOPS_SUCCESS) {
      rt->state_destroy[slot] = destroy;
      __atomic_store_n(&rt->states[slot], state, __ATOMIC_RELEASE);
    } else {
      state = NULL;
    }
  }
  *out = state;
  pthread_mutex_unlock(&rt->state_lock);
  return status;
}
