/* The runtime object. A runtime is bound to one device (or to one
 * target, when compile-only) and owns everything a kernel request touches: its sources, its
 * in-memory registry, its disk tier and its counters. Nothing here is process-global; what
 * runtimes of one process share is the image table (images.h), which holds only bytes. */
#ifndef JITOPS_RUNTIME_RUNTIME_INTERNAL_H
#define JITOPS_RUNTIME_RUNTIME_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "cache/remote.h"
#include "cache/store.h"
#include "runtime/background.h"
#include "runtime/compiler.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/kernel_object.h"
#include "runtime/key.h"
#include "runtime/registry.h"
#include "runtime/sources.h"
#include "runtime/state.h"

struct jitops_runtime {
  int device; /* -1 when compile-only */
  CUdevice cu_device;
  CUcontext context; /* the retained primary context; NULL when compile-only */
  const jitops__driver *driver;
  jitops__device_props props;
  /* Whether jitops__launch_after makes programmatic dependent launches: sm_90 or newer, a
   * driver for CUDA 12.3 or newer (which captures them into graphs), and not
   * JITOPS_DEPENDENT_LAUNCHES=0. Set once, when the device opens. */
  int dependent_launches;
  jitops__target target;
  int nvrtc_version;
  char device_name[256];

  jitops__source_set sources;
  jitops__registry registry;
  pthread_mutex_t build_lock; /* guards kernel state changes; build_done signals them */
  pthread_cond_t build_done;
  jitops__store *store;   /* NULL without a disk tier */
  jitops__remote *remote; /* NULL without a remote tier */

  /* The application's scratch allocator (jitops_runtime_set_allocator): `allocator` is written
   * once, before `has_allocator` is set (release); readers check the flag (acquire). */
  jitops_allocator allocator;
  int has_allocator;

  /* Whether an op call may launch a quick build of a kernel found nowhere, its full build
   * queued in `background` (kernel_batch.h): $JITOPS_QUICK_BUILDS, no remote tier, and an
   * NVRTC that takes the quick option; cleared for good when a quick build fails where a full
   * one succeeds. */
  int quick_builds;
  jitops__background background;

  pthread_mutex_t state_lock;
  void *states[JITOPS__SLOT_COUNT];
  void (*state_destroy[JITOPS__SLOT_COUNT])(jitops_runtime_t *, void *);

  /* Counters (atomic). */
  uint64_t memory_hits, disk_hits, misses, compiles, compile_errors, waits;
  uint64_t remote_hits, remote_misses, shared_hits;
  uint64_t compile_us;
  uint64_t quick_compiles;
};

#endif
