/* The kernels one op call needs, gathered first and then got together: those already in the
 * runtime's memory at once, on the calling thread; the others built in parallel, so that a
 * cold call that needs several kernels waits for its slowest compile rather than for the sum
 * of them. */
#ifndef JITOPS_RUNTIME_KERNEL_BATCH_H
#define JITOPS_RUNTIME_KERNEL_BATCH_H

#include <stddef.h>

#include "jitops/jitops.h"

enum {
  JITOPS__KERNEL_BATCH_MAX = 16,   /* kernels one call may gather */
  JITOPS__KERNEL_BATCH_EXPR = 256, /* bytes of a name expression, its NUL included */
  JITOPS__KERNEL_BATCH_THREADS = 8 /* builders at most, the calling thread included */
};

/* Quick builds. A cold call's wait is its kernels' compile, and most of a compile is NVRTC
 * optimizing and assembling unrolled loops. NVRTC's fast-compile level "mid" builds a source 2
 * to 7 times faster into slower code, and with JITOPS__QUICK_DEFINE the templates leave out
 * their specialized copies (below). So a call that launches (not a prewarm) and finds
 * a QUICK kernel nowhere (memory, disk, another runtime) builds it with jitops__quick_options,
 * launches that, and queues the full build on the runtime's background workers
 * (background.h); its later calls find the full kernel in memory, and on disk in the next
 * process. A quick build is an ordinary kernel under its own cache key (its options differ), so
 * it is stored and shared like any other, and a warm process that finds only it uses it while
 * the full one is built again. No quick build while the launch stream is capturing a CUDA graph
 * (the graph would keep it): the call waits for the full one. $JITOPS_QUICK_BUILDS=0 turns them
 * off; a runtime with a remote tier (whose fleet serves full builds), and an NVRTC older than
 * 12.8 or one that refuses the options, never gets them.
 *
 * QUICK is the op's promise that the kernel's results are the same bits however it is
 * optimized: integer and comparison arithmetic, float additions and IEEE divisions in an order
 * the source fixes, every product that feeds a sum an explicit fma (the one rounding an
 * optimizer may otherwise change, by contracting it or not), and a math library call's result
 * (whose code may end in a product) added with an explicit rounding (add_rn), or no such call.
 * tests/test_quick_kernels_contract_nothing.c checks the promise for every kernel the ops flag:
 * its code must not change under --fmad=false, in full or quick, or else its PTX must show
 * nothing contracted and nothing left to contract. A template that compiles a shorter path in
 * quick builds (JITOPS__QUICK_DEFINE) promises the same of that path: the same values combined
 * in the same order, which the GPU suites check by comparing every case's quick and full runs. */
#define JITOPS__QUICK_OPTION "-Ofc=mid"
enum { JITOPS__QUICK_MIN_NVRTC = 1208 };

/* A quick build's options: the fast-compile level, and JITOPS_QUICK_BUILD defined, with which a
 * template compiles only the general path where it has a specialized copy of it that computes
 * the same values in the same order (common.cuh, QUICK_BUILD): the scans' kernels compile in
 * about 0.7 of the time that level alone takes. */
#define JITOPS__QUICK_DEFINE "-DJITOPS_QUICK_BUILD"
enum { JITOPS__QUICK_OPTION_COUNT = 2 };
extern const char *const jitops__quick_options[JITOPS__QUICK_OPTION_COUNT];

/* What an op says about a kernel it adds. */
enum {
  JITOPS__KERNEL_SMALL = 1u,   /* compiles in a fraction of the others' time: built after them */
  JITOPS__KERNEL_QUICK = 2u,   /* the same bits at any optimization level: may be a quick build */
  JITOPS__KERNEL_DEFERRED = 4u /* launched only when the device raises a flag: may be left NULL */
};

/* Deferred kernels. Some calls launch a kernel only when an earlier kernel of the call finds, on
 * the device, that it must (the segment digit path's fallback sort, behind a flag that skewed ids
 * raise). A cold call should not wait for such a kernel's compile when its data will not use it.
 * So where a batch may take quick builds (a launching call, quick builds on, the stream not
 * capturing), a DEFERRED kernel that is neither in memory nor on disk (nor ready yet where
 * another thread builds it) is left NULL in *out, and its full build is asked of the background
 * after the batch's own builds, so that it does not slow them (unless that build failed before:
 * the batch then builds it, as a QUICK kernel where it may be one). The op then launches what it
 * has, reads the flag (one stream synchronization: jitops__read_device_int32), and only if the flag
 * is up gets the kernel with a batch of its own, as a cold call would. Its results are the same:
 * the kernel it launches late sees the same device state it would have seen launched early. Every
 * call until the background build lands (queued last: a second or more on two cores) reads the flag
 * so; calls that find the kernel never synchronize, nor does any call while capturing, under
 * $JITOPS_QUICK_BUILDS=0, or on a runtime without quick builds (a remote tier's: the fleet shares
 * the full builds). */

typedef struct jitops__kernel_batch_item {
  const char *source; /* a built-in source name (static storage) */
  char expr[JITOPS__KERNEL_BATCH_EXPR];
  jitops_kernel_t **out;
  unsigned flags;
  int quick;    /* being got as a quick build */
  int deferred; /* left NULL, its full build asked of the background (above) */
} jitops__kernel_batch_item;

typedef struct jitops__kernel_batch {
  size_t count;
  int launches; /* jitops__kernel_batch_for_launch was called */
  void *stream; /* the launch stream, when `launches` */
  jitops__kernel_batch_item item[JITOPS__KERNEL_BATCH_MAX];
} jitops__kernel_batch;

/* An empty batch whose kernels are full builds (a prewarm's). */
void jitops__kernel_batch_init(jitops__kernel_batch *batch);

/* Marks the batch as an op call's that launches on `stream`: its QUICK kernels may be quick
 * builds. */
void jitops__kernel_batch_for_launch(jitops__kernel_batch *batch, void *stream);

/* Adds "source, expr" (no options), to be written to *out by jitops__kernel_batch_get.
 * JITOPS_ERR_INTERNAL when the batch is full or the expression too long. */
jitops_status jitops__kernel_batch_add(jitops__kernel_batch *batch, const char *source,
                                       const char *expr, jitops_kernel_t **out);

/* The same, with JITOPS__KERNEL_* flags. A SMALL kernel is taken by the builders after the
 * others: with fewer cores than kernels, the long compiles then start at once and the small one
 * fills in behind them instead of delaying one of them (a segment sort's cold call: 0.46-0.55 s
 * -> 0.41-0.50 s on two cores). */
jitops_status jitops__kernel_batch_add_flagged(jitops__kernel_batch *batch, const char *source,
                                               const char *expr, jitops_kernel_t **out,
                                               unsigned flags);

/* Flags the kernels added since the batch held `first` of them as DEFERRED (above). */
void jitops__kernel_batch_defer_since(jitops__kernel_batch *batch, size_t first);

/* Every kernel of the batch, as jitops_kernel_get would give it, or its quick build, or (a
 * DEFERRED kernel) NULL (above).
 * Kernels in memory, and (for a batch of several, or a QUICK or DEFERRED kernel) those on disk, are
 * got on the calling thread; the others are built by up to min(their number, the online CPUs,
 * JITOPS__KERNEL_BATCH_THREADS) threads, the calling one included, small ones last; the log may
 * then run on those threads. On failure, the status and message are those of the first failing
 * kernel in the batch's order (small ones included). */
jitops_status jitops__kernel_batch_get(jitops_runtime_t *runtime, jitops__kernel_batch *batch);

/* The ready kernel of (source, expr, options) in the runtime's memory, counted as a memory
 * hit; NULL when it is not there yet (kernel.c). */
jitops_kernel_t *jitops__kernel_find_ready(jitops_runtime_t *runtime, const char *source_name,
                                           const char *name_expression, const char *const *options,
                                           size_t num_options);

/* The kernel of (source, expr, options) from memory, another runtime of the process, or
 * the disk tier, as jitops_kernel_get would give it, without claiming, asking the remote tier
 * or compiling: JITOPS_ERR_NOT_FOUND (no message) when it is in none of them, and at once,
 * without waiting, when another thread of any runtime is building it (kernel.c). */
jitops_status jitops__kernel_get_stored(jitops_runtime_t *runtime, const char *source_name,
                                        const char *name_expression, const char *const *options,
                                        size_t num_options, jitops_kernel_t **out);

#endif
