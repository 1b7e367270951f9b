/* The process-wide image table: compiled kernel images (CUBIN or PTX bytes and the lowered
 * name), shared by every runtime of the process and keyed by the full cache key.
 *
 * Why process-wide: a process with one runtime per GPU would otherwise run NVRTC once per
 * device for the same kernel, since each runtime's registry (the memory tier) is its own and
 * the disk tier may be off. The cache key already covers everything that decides the bytes
 * (sources, name expression, options, target, NVRTC version, cache format), so an image
 * built by one runtime is exactly what every other runtime of that target would build; each
 * runtime still loads it into its own context (a CUmodule cannot cross contexts).
 *
 * Why this is the one piece of global state besides the log: it holds only bytes that the
 * key names, never a handle, a context or a setting. Images are counted references: a
 * runtime's kernel holds one on the image it was built from, so an image lives while some
 * runtime of the process has that kernel loaded (when another runtime is most likely to ask
 * for it) and is freed with the last, so the table never outgrows what the registries hold.
 *
 * Compile once in the process: the first runtime to miss a key becomes its builder (disk,
 * remote, NVRTC as before) and every other thread that asks for the key, in any runtime,
 * waits for it, then shares the result. A builder that fails gives the key up; a waiter
 * then builds it itself (and fails the same way, with its own message), as the disk tier's
 * claims do across processes. */
#ifndef JITOPS_RUNTIME_IMAGES_H
#define JITOPS_RUNTIME_IMAGES_H

#include <stddef.h>

#include "common/hash.h"
#include "jitops/jitops.h"

typedef struct jitops__image {
  const void *bytes; /* what cuModuleLoadData takes */
  size_t size;
  const char *lowered_name;
} jitops__image;

/* The image of `key`, once the process has one: waits while another thread builds it, then
 * returns it with a reference taken (*build 0). When none is there, the caller becomes the
 * key's builder and must end with jitops__images_publish or jitops__images_abandon (*build 1;
 * the return value is the pending entry). NULL with *build 1 when out of host memory: build
 * without sharing. */
jitops__image *jitops__images_acquire(jitops__key key, int *build);

/* As jitops__images_acquire, but never waits: while another thread builds the key it returns
 * NULL with *build 0 at once. For lookups that must not stall behind a compile (an op's batch
 * checking what is already stored, before it starts building the rest). */
jitops__image *jitops__images_try_acquire(jitops__key key, int *build);

/* Fills the builder's pending entry with a copy of `bytes` and `lowered_name`, and wakes the
 * waiters; the builder keeps its reference. Returns 0 (having abandoned the entry) when out
 * of host memory. */
int jitops__images_publish(jitops__image *pending, const void *bytes, size_t size,
                           const char *lowered_name);

/* Gives up the builder's claim after a failed build; waiters then build themselves. */
void jitops__images_abandon(jitops__image *pending);

/* Drops a reference (NULL: none); the last frees the image. */
void jitops__images_release(jitops__image *image);

#endif
