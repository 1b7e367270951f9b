/*
 * libjitops — GPU operations whose kernels are compiled at run time.
 *
 * This is the one public header. It declares the core: status codes and errors, the runtime
 * (one per CUDA device), the JIT service (register CUDA C++ sources, get kernels by name
 * expression, launch them), the cache statistics and the cache administration used by the
 * `jitops-cache` tool. The built-in ops are declared in the per-family headers included at
 * the end.
 *
 * Conventions, for every entry point:
 *   - Every function returns a jitops_status. JITOPS_SUCCESS is 0; anything else is a failure
 *     whose details jitops_last_error() returns on the same thread.
 *   - The library never aborts or exits. It logs through JITOPS_LOG (off|error|warn|info|
 *     debug, default warn) to stderr, or to the application's jitops_set_log_callback; at the
 *     default it speaks only when something the user configured cannot be honoured (a disk
 *     tier turned off, an environment value it does not understand), once per process.
 *   - Every function is thread-safe. Handles are opaque and come in create/destroy pairs.
 *   - Tensors are DLPack DLTensors: strides are in elements (NULL means compact row-major),
 *     byte_offset is honoured, and device tensors must live on the runtime's device.
 *   - Kernels run on the stream the caller passes (NULL is the legacy default stream) and
 *     the library never synchronizes unless an entry point says so.
 *   - A problem with the disk cache never fails a call: the cache is a speed-up, and the
 *     library falls back to compiling in memory, with one warning in the log. A busy cache
 *     (another process writing, an import) never holds a call up for long: each step of the
 *     disk tier waits at most 2 seconds for another process's lock, then goes on without it.
 *   - Nor does a problem with the remote tier (Redis, shared by a fleet: see "The remote tier"
 *     below): a server that is down, slow, full or answering garbage leaves the library
 *     compiling locally, after a few short timeouts at most and one warning.
 */
#ifndef JITOPS_JITOPS_H
#define JITOPS_JITOPS_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define JITOPS_API
#else
#define JITOPS_API __attribute__((visibility("default")))
#endif

#define JITOPS_VERSION_MAJOR 0
#define JITOPS_VERSION_MINOR 1
#define JITOPS_VERSION_PATCH 0

/* ------------------------------------------------------------------------------------------
 * Status and errors
 * ---------------------------------------------------------------------------------------- */

typedef enum jitops_status {
  JITOPS_SUCCESS = 0,
  JITOPS_ERR_INVALID_ARGUMENT = 1, /* a NULL pointer, or a bad scalar or flag */
  JITOPS_ERR_INVALID_SHAPE = 2,    /* a rank, shape or length that does not fit the op */
  JITOPS_ERR_INVALID_DTYPE = 3,    /* a dtype the op does not take, or tensors that disagree */
  JITOPS_ERR_INVALID_LAYOUT = 4,   /* strides, byte offsets or alignment the op cannot use */
  JITOPS_ERR_INVALID_DEVICE = 5,   /* a tensor on another device, or in the wrong memory */
  JITOPS_ERR_OUT_OF_RANGE = 6,     /* a value checked on the host (a length, an index) */
  JITOPS_ERR_NOT_FOUND = 7,        /* an unknown source name or catalogue entry */
  JITOPS_ERR_ALREADY_EXISTS = 8,   /* a source name already registered with other contents */
  JITOPS_ERR_COMPILE = 9,          /* NVRTC failed; jitops_last_error() holds its log */
  JITOPS_ERR_NO_DEVICE = 10,       /* no CUDA driver or device, or a compile-only runtime */
  JITOPS_ERR_DRIVER = 11,          /* a CUDA driver call failed */
  JITOPS_ERR_OUT_OF_MEMORY = 12,   /* host or device memory */
  JITOPS_ERR_UNSUPPORTED = 13,     /* valid, but not supported by this build or device */
  JITOPS_ERR_CACHE = 14,           /* only from the jitops_cache_* administration calls */
  JITOPS_ERR_IO = 15,              /* a file could not be read or written */
  JITOPS_ERR_INTERNAL = 16         /* a bug in libjitops: please report it */
} jitops_status;

/* The status's name, such as "JITOPS_ERR_COMPILE". Never NULL. */
JITOPS_API const char *jitops_status_string(jitops_status status);

/* The calling thread's most recent failure, as one message that names the function and the
 * argument ("jitops_kernel_get: name_expression is NULL"). "" before any failure. The
 * pointer stays valid until the next failing call on this thread. */
JITOPS_API const char *jitops_last_error(void);

/* "0.1.0". */
JITOPS_API const char *jitops_version_string(void);

/* ------------------------------------------------------------------------------------------
 * Logging
 * ---------------------------------------------------------------------------------------- */

typedef enum jitops_log_level {
  JITOPS_LOG_ERROR = 1, /* something failed that the library could not work around */
  JITOPS_LOG_WARN = 2,  /* something configured cannot be honoured; the default threshold */
  JITOPS_LOG_INFO = 3,  /* compile times */
  JITOPS_LOG_DEBUG = 4  /* cache decisions */
} jitops_log_level;

/* Receives one log message: `level` is a jitops_log_level, `message` one line without a
 * trailing newline or prefix, valid only during the call. */
typedef void (*jitops_log_callback)(void *user, int level, const char *message);

/* Routes the library's log to `callback` instead of stderr, for the whole process (as SQLite's
 * SQLITE_CONFIG_LOG); NULL restores stderr. Which messages come is unchanged: those at or
 * above the threshold of $JITOPS_LOG (default warn; "off" sends none).
 *
 * Contract for `callback`:
 *   - It runs synchronously on the thread whose call into the library logs, on a thread that
 *     call started to compile an op's kernels in parallel (while the call waits), or on a
 *     runtime's background thread (full builds after quick builds, see jitops_runtime_wait_builds,
 *     until the runtime is destroyed), and may run on several threads at once: it must be
 *     thread-safe.
 *   - It may run while the library holds internal locks: it must return promptly and must not
 *     call any jitops_ function (jitops_set_log_callback included), which may deadlock.
 *   - Warnings given once per process are not repeated for a callback installed later.
 * This function may be called from any thread at any time. When it returns, the previous
 * callback is not running and will never be called again, so its `user` may be freed.
 * Returns JITOPS_SUCCESS. */
JITOPS_API jitops_status jitops_set_log_callback(jitops_log_callback callback, void *user);

/* ------------------------------------------------------------------------------------------
 * Runtime: one per CUDA device
 * ---------------------------------------------------------------------------------------- */

typedef struct jitops_runtime jitops_runtime_t;

typedef enum jitops_cache_mode {
  JITOPS_CACHE_MODE_DEFAULT = 0,   /* $JITOPS_CACHE: off, readonly, else read-write */
  JITOPS_CACHE_MODE_READWRITE = 1, /* look up, and store what is compiled */
  JITOPS_CACHE_MODE_READONLY = 2,  /* look up only; compiled kernels live in memory */
  JITOPS_CACHE_MODE_OFF = 3        /* no disk tier at all */
} jitops_cache_mode;

/* ABI: fields are only ever appended (remote_cache and remote_cache_key came last). Fill it
 * with jitops_runtime_config_init before setting fields, so that fields a program does not
 * know take their defaults; the library reads the whole struct, so a program built against an
 * older jitops.h must be rebuilt (the 0.x series promises source compatibility only). */
typedef struct jitops_runtime_config {
  /* CUDA device ordinal. -1 makes a compile-only runtime, which needs `arch`: it compiles
   * and caches, and every launch returns JITOPS_ERR_NO_DEVICE. */
  int device;
  /* Target such as "sm_90". NULL: the device's own. With a device, it must match it. */
  const char *arch;
  /* Cache directory. NULL: $JITOPS_CACHE_DIR, else $XDG_CACHE_HOME/jitops, else
   * ~/.cache/jitops. The directory is created 0700 and must be owned by the caller and not
   * writable by others; otherwise the disk tier is turned off with one warning. */
  const char *cache_dir;
  jitops_cache_mode cache_mode;
  /* Upper bound of the database's blob bytes; least recently used kernels go first.
   * 0: $JITOPS_CACHE_MAX_BYTES (a byte count with an optional binary suffix K, M, G or T:
   * "512M", "1G"), else 1 GiB. Negative: unbounded. */
  int64_t cache_max_bytes;
  /* A shipped, read-only second tier (a file made by `jitops-cache export`), opened
   * immutable and consulted after the main database. NULL: $JITOPS_CACHE_SHIPPED, if set;
   * "": none. */
  const char *shipped_cache;
  /* The remote tier, shared by a fleet (see "The remote tier" below):
   * "redis://[user:password@]host[:port][/db]". NULL: $JITOPS_CACHE_REMOTE, if set; "": none. */
  const char *remote_cache;
  /* The fleet's key for signing the remote tier's blobs (HMAC-SHA256), any bytes; use 32 random
   * ones. NULL: $JITOPS_CACHE_REMOTE_KEY, if set; "": none (blobs are neither signed nor
   * checked, and the server must be trusted). */
  const char *remote_cache_key;
} jitops_runtime_config;

/* ------------------------------------------------------------------------------------------
 * The remote tier
 *
 * A kernel that is in neither memory nor a local database (main or shipped) is asked of a
 * Redis server shared by many machines, before it is compiled:
 *   - A hit is verified as a local row is (cache format, target, NVRTC version, the integrity
 *     hash over key, kind, target, lowered name and blob) and, with a key, its signature; then
 *     it is stored in the local database, so that the next process finds it on disk.
 *   - A miss takes the fleet's claim on the key (SET NX with a 30 s expiry), compiles, and
 *     publishes the blob (SET, then the claim is released). A node that finds the claim taken
 *     polls for the blob (5 ms, doubling to 100 ms) for at most 60 s, and takes the claim over
 *     when it expires or is released without a blob; after 60 s it compiles by itself. So a
 *     fleet compiles each kernel once, and a node killed mid-compile costs the others its
 *     claim's expiry at most. Within one machine, the disk tier's claim comes first: one
 *     process of a cache directory asks the server, the others wait for its row.
 *   - Never a failure and never a stall: a connect and each request are bounded by
 *     $JITOPS_CACHE_REMOTE_TIMEOUT_MS (default 50 ms; a request moving a large blob gets 1 ms
 *     more per 16 KiB). 3 consecutive failed requests (no connection, a timeout, a reply that
 *     is not Redis's, an error reply such as OOM) open a circuit breaker: the tier is skipped
 *     for 5 s, then one request tries it again; each failed retry doubles the pause, up to 60 s,
 *     and a success closes the breaker. The first failure is warned about once per process;
 *     the rest go to the log at debug. A host name is resolved once per runtime, by the system
 *     resolver, which no timeout bounds: give an address where that matters.
 *   - Keys on the server: "jitops:<format>.<schema>:kernel:<32 hex digits>" holds a record (the
 *     row's fields, its hash and its signature: cache/remote_record.h), and
 *     "jitops:<format>.<schema>:claim:<hex>" a claim. Records do not expire: run the server with
 *     a memory bound and an eviction policy (maxmemory, maxmemory-policy allkeys-lru).
 *   - With a key ($JITOPS_CACHE_REMOTE_KEY or remote_cache_key), every record is signed with
 *     HMAC-SHA256 under it, over all its bytes, and an unsigned or wrongly signed record is
 *     refused (counted in remote_errors, warned about once, and recompiled). Without a key the
 *     server must be trusted like the cache directory: anybody who can write to it chooses the
 *     code your GPUs run. Use Redis AUTH and ACLs either way.
 *   - A build without hiredis (or an address this library does not understand) reports the
 *     tier as JITOPS_REMOTE_STATE_UNAVAILABLE, warns once, and compiles locally.
 * ---------------------------------------------------------------------------------------- */

typedef enum jitops_remote_state {
  JITOPS_REMOTE_STATE_OFF = 0,         /* no remote tier configured */
  JITOPS_REMOTE_STATE_UNAVAILABLE = 1, /* configured, but it cannot be used: remote_reason */
  JITOPS_REMOTE_STATE_ON = 2,          /* consulted on every local miss */
  JITOPS_REMOTE_STATE_SUSPENDED = 3    /* repeated failures opened its breaker: skipped for now */
} jitops_remote_state;

/* Fills `config` with the defaults: device 0, everything else from the environment. */
JITOPS_API void jitops_runtime_config_init(jitops_runtime_config *config);

/* Creates a runtime. For a device, it loads libcuda.so.1 and retains the device's primary
 * context (the one the CUDA runtime, PyTorch and CuPy use). `config` NULL means the
 * defaults. Errors: JITOPS_ERR_INVALID_ARGUMENT (out NULL, device < -1, device -1 without
 * arch, a malformed arch), JITOPS_ERR_NO_DEVICE (no driver, or no such device),
 * JITOPS_ERR_UNSUPPORTED (arch not the device's), JITOPS_ERR_DRIVER, JITOPS_ERR_OUT_OF_MEMORY. */
JITOPS_API jitops_status jitops_runtime_create(const jitops_runtime_config *config,
                                               jitops_runtime_t **out);

/* Flushes the cache's usage counts, unloads every module and releases the primary context.
 * The caller must have finished (or synchronized) all work it launched. NULL is a no-op. */
JITOPS_API void jitops_runtime_destroy(jitops_runtime_t *runtime);

/* What the main disk database is to a runtime now. */
typedef enum jitops_cache_state {
  JITOPS_CACHE_STATE_OFF = 0,      /* not used (a shipped tier may still answer) */
  JITOPS_CACHE_STATE_READONLY = 1, /* kernels are looked up, never stored */
  JITOPS_CACHE_STATE_READWRITE = 2 /* kernels are looked up, and stored when compiled */
} jitops_cache_state;

/* ABI: fields are only ever appended to this struct, and jitops_runtime_get_info fills all of
 * it, so a program compiled against an older jitops.h (before cache_state) must be rebuilt
 * before it calls a newer library; the 0.x series promises source compatibility only. */
typedef struct jitops_runtime_info {
  int device;                     /* -1 for a compile-only runtime */
  int has_device;                 /* 1 when launches can run */
  int arch;                       /* 90 for sm_90 */
  int nvrtc_version;              /* 1300 for NVRTC 13.0 */
  char arch_name[16];             /* "sm_90" */
  char device_name[256];          /* "" without a device */
  char cache_path[1024];          /* the database in use (the shipped tier's when the main one is
                                     off), "" when there is none */
  int cache_writable;             /* 1 when compiled kernels are stored on disk */
  jitops_cache_state cache_state; /* the main database's state now */
  /* 1 when the library turned the main database off or read-only itself, for a reason
   * nobody asked for (an unsafe or read-only directory, damage it could not repair); it
   * warned about it once, at the default log level. */
  int cache_degraded;
  /* Why cache_state is not read-write, asked for ("JITOPS_CACHE asks for no disk tier") or
   * not ("cache directory ... is writable by others ..."); "" when it is read-write. */
  char cache_reason[512];
  int64_t cache_max_bytes; /* the size bound in force; -1: unbounded */
  jitops_remote_state remote_state;
  int remote_signed;        /* 1 when records are signed and checked with a key */
  char remote_address[320]; /* "redis://user@host:port/db", never the password; "" if none */
  char remote_reason[512];  /* why remote_state is UNAVAILABLE or SUSPENDED; "" otherwise */
} jitops_runtime_info;

JITOPS_API jitops_status jitops_runtime_get_info(const jitops_runtime_t *runtime,
                                                 jitops_runtime_info *out);

/* Counters since the runtime was created. Every kernel request is exactly one of a memory
 * hit, a shared hit, a disk hit, a remote hit or a miss. A miss compiles, unless another
 * process compiled the same key while this one waited for it, which counts as a disk (or
 * remote) hit after a wait.
 *
 * Several runtimes in one process (one per GPU, say) compile each kernel once for all the
 * devices of one architecture: a compiled image is shared process-wide under its cache key
 * (which names the target and the NVRTC version), and every runtime loads it into its own
 * context. A runtime whose registry misses first looks there, and when another runtime has
 * the kernel (or is building it, in which case it waits) that is a shared hit: no NVRTC, no
 * disk. So across the process's runtimes, compiles counts each kernel of a target once. An
 * image is kept while some runtime holds its kernel; a shared hit does not store the kernel
 * in this runtime's own disk tier (the runtime that built it did, if its tier is writable).
 * Images are shared whatever tier they came from: every runtime of the process trusts what
 * another verified (a remote tier's signature, say). ABI: fields are only ever appended. */
typedef struct jitops_stats {
  uint64_t memory_hits;
  uint64_t disk_hits;
  uint64_t misses;
  uint64_t compiles;       /* NVRTC runs that succeeded */
  uint64_t compile_errors; /* NVRTC runs that failed */
  uint64_t waits;          /* misses that waited for another process's compile */
  uint64_t disk_errors;    /* cache problems survived (corruption, I/O, full disk) */
  double compile_ms;       /* total NVRTC time */
  uint64_t remote_hits;    /* kernels taken, verified, from the remote tier */
  uint64_t remote_misses;  /* misses the remote tier was asked about and could not serve */
  uint64_t remote_errors;  /* failed requests, and records refused (bad hash or signature) */
  uint64_t shared_hits;    /* kernels another runtime of this process had built: its image,
                              loaded into this runtime's context */
  uint64_t quick_compiles; /* of compiles, the quick builds of a cold call's kernels (see
                              jitops_runtime_wait_builds) */
} jitops_stats;

JITOPS_API jitops_status jitops_runtime_get_stats(const jitops_runtime_t *runtime,
                                                  jitops_stats *out);

/* Quick builds. A built-in op's first call on an empty cache waits for its kernels' compile.
 * Where a kernel's results are the same bits however NVRTC optimizes it (no product that NVRTC
 * or ptxas may contract into a sum: the segment reductions, every scan and its backward but the
 * f64 logcumsumexp, and CTC and fused linear cross-entropy but in f64), that first call compiles it
 * at NVRTC's fast-compile level instead, in a fraction of the time, and launches that build while
 * the full build runs on background threads of the runtime; later calls launch the full build
 * once it is ready, and later processes find it on disk. Results are identical either way; only
 * the first calls' speed differs. Never while the call's stream is capturing a graph (the graph
 * would keep the quick build): such a call waits for the full build. $JITOPS_QUICK_BUILDS=0
 * turns quick builds off, and a runtime with a remote tier has none (the fleet serves full
 * builds); the prewarm catalogue (jitops_catalogue_compile) and jitops_kernel_get always build
 * in full. With quick builds, a cold call also leaves out a kernel it launches only when the
 * device finds that it must: the segment digit path's fallback sort (skewed ids). It reads that
 * flag instead (the one host synchronization of an op without a synchronization in its
 * contract, on the calls until that kernel is built), builds the kernel then if the flag is up,
 * and leaves its full build to the background otherwise (never while capturing).
 *
 * jitops_runtime_wait_builds returns once the background builds queued before it are done, so
 * that every later launch of those kernels is a full build (before timing an op, say).
 * jitops_runtime_destroy waits for all of them. A process that exits with runtimes alive lets
 * no background build start and waits for those under way, dropping the queued ones (an exit
 * handler, registered when the process's first background worker starts, so that NVRTC's static
 * destructors never run under a compile; after it has run, jitops_runtime_wait_builds returns
 * with the dropped builds not done). Compiles on the application's own threads are its own, as
 * any call in flight at exit is. Background threads block asynchronous signals. Do not use a
 * runtime in a child forked from its process (its background threads are not there). */
JITOPS_API jitops_status jitops_runtime_wait_builds(jitops_runtime_t *runtime);

/* ------------------------------------------------------------------------------------------
 * The JIT service: user templates through the same machinery as the built-in ops
 * ---------------------------------------------------------------------------------------- */

/* Registers CUDA C++ source text under `name` in this runtime. Sources may include each other
 * and the built-in headers by name (#include "jitops/common.cuh"). Registering the same
 * contents again is a no-op; other contents under a used name give JITOPS_ERR_ALREADY_EXISTS.
 * The text is copied. Names are at most 255 bytes of [A-Za-z0-9_./-].
 *
 * Registered sources are all NVRTC ever reads, so that a kernel's cache key covers every byte
 * of its input and a header changed on disk can never be served stale from the cache:
 * jitops_kernel_get refuses (JITOPS_ERR_INVALID_ARGUMENT) a kernel whose sources include a file
 * by an absolute path or through a macro (#include WHERE), anywhere in their text, and options
 * that make NVRTC read files (-I, --include-path, -include, --pre-include, the precompiled-
 * header options). A relative include that names no registered source fails to compile
 * (JITOPS_ERR_COMPILE): NVRTC is given no directory to look in. Register such headers and
 * include them by their registered names. */
JITOPS_API jitops_status jitops_source_register(jitops_runtime_t *runtime, const char *name,
                                                const char *source);

typedef struct jitops_kernel jitops_kernel_t;

/* Returns the kernel `name_expression` (a __global__ function, or a template instance such
 * as "my::axpy<float, 4>") from the source `source_name`, compiled with `options` (NVRTC
 * options such as "-DTILE=64"; the library adds the target and its own defaults). The first
 * request compiles or loads from disk; later ones cost one hash and one table probe. The
 * kernel belongs to the runtime and lives as long as it does.
 * Errors: JITOPS_ERR_INVALID_ARGUMENT (also: an include of, or an option that reads, a file
 * on disk; see jitops_source_register), JITOPS_ERR_NOT_FOUND (no such source),
 * JITOPS_ERR_COMPILE (the NVRTC log is in jitops_last_error()), JITOPS_ERR_DRIVER. On a
 * compile-only runtime the kernel is compiled and cached but cannot be launched. */
JITOPS_API jitops_status jitops_kernel_get(jitops_runtime_t *runtime, const char *source_name,
                                           const char *name_expression, const char *const *options,
                                           size_t num_options, jitops_kernel_t **out);

typedef struct jitops_launch_params {
  uint32_t grid[3];      /* blocks; each ≥ 1 */
  uint32_t block[3];     /* threads per block; each ≥ 1 */
  uint32_t shared_bytes; /* dynamic shared memory; above 48 KiB the opt-in limit is set */
  void *stream;          /* a CUstream or cudaStream_t; NULL is the legacy default stream */
} jitops_launch_params;

/* Launches `kernel` with `args` (an array of pointers to each argument, as cuLaunchKernel
 * takes them). Asynchronous. It makes the kernel's runtime's context current for the launch
 * and restores the caller's after, so threads may launch on different devices at once, each
 * with the runtime of its device. The arguments are opaque to the library, so pointers into
 * another device's memory are the caller's to avoid (jitops_pointer_check, below). Errors:
 * JITOPS_ERR_INVALID_ARGUMENT (bad dimensions), JITOPS_ERR_NO_DEVICE (compile-only runtime),
 * JITOPS_ERR_INVALID_DEVICE (a stream of another context than the runtime's, such as another
 * device's), JITOPS_ERR_DRIVER. */
JITOPS_API jitops_status jitops_kernel_launch(const jitops_kernel_t *kernel,
                                              const jitops_launch_params *params, void **args);

/* Parameter `index` of the kernel's __global__ function: its offset and size in bytes in the
 * kernel's parameter buffer, so that a binding can check the arguments it is about to pass
 * before jitops_kernel_launch hands them to the driver, which cannot (their number is the
 * first index that gives JITOPS_ERR_OUT_OF_RANGE). Errors: JITOPS_ERR_OUT_OF_RANGE (`index`
 * is not a parameter), JITOPS_ERR_NO_DEVICE (compile-only runtime), JITOPS_ERR_UNSUPPORTED (a
 * driver older than CUDA 12.4, which cannot say), JITOPS_ERR_DRIVER. */
JITOPS_API jitops_status jitops_kernel_param_info(const jitops_kernel_t *kernel, size_t index,
                                                  size_t *offset, size_t *size);

/* The lowered (mangled) name of the kernel, for diagnostics. */
JITOPS_API const char *jitops_kernel_lowered_name(const jitops_kernel_t *kernel);

/* For bindings that launch kernels on other frameworks' arrays (DLPack, the CUDA Array
 * Interface): the two things such a binding must do before jitops_kernel_launch. */

/* Makes the work enqueued on `stream` from now on wait until the work enqueued on `producer`
 * so far has finished, without blocking the host: an event recorded on `producer` and waited
 * on by `stream` (under stream capture this joins the two streams, as CUDA graphs do). NULL and
 * 1 are the legacy default stream, 2 the per-thread default stream (CUDA's CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD, and the values DLPack and the CUDA Array Interface give them). The
 * same stream twice is nothing to do, and so are two streams that are not capturing into the
 * same graph while one of them captures: a graph cannot depend on work outside it, nor work
 * outside on a graph not yet run, nor one graph on another (the driver would refuse, or pull
 * the stream into the capture), so across a capture's edge the ordering is the caller's, as for
 * any captured work. Errors: JITOPS_ERR_NO_DEVICE (compile-only runtime),
 * JITOPS_ERR_INVALID_DEVICE (a stream of another context than the runtime's),
 * JITOPS_ERR_DRIVER. */
JITOPS_API jitops_status jitops_stream_wait(jitops_runtime_t *runtime, void *stream,
                                            void *producer);

/* Refuses, with JITOPS_ERR_INVALID_DEVICE naming both devices, a pointer that the driver says
 * is another device's memory (not managed): a kernel of this runtime would fault on it, or,
 * with peer access, read across the interconnect, which the library does not track and does
 * not allow. The runtime's device memory, managed memory and page-locked host memory pass, and
 * so does memory the driver does not know (system memory, which some systems let devices
 * read): that stays the caller's to judge. Errors also: JITOPS_ERR_NO_DEVICE (compile-only
 * runtime), JITOPS_ERR_DRIVER. */
JITOPS_API jitops_status jitops_pointer_check(jitops_runtime_t *runtime, const void *pointer);

/* ------------------------------------------------------------------------------------------
 * Workspace: scratch memory for ops that need it
 * ---------------------------------------------------------------------------------------- */

/* Device memory the caller lends to an op. An op that needs scratch takes a
 * `const jitops_workspace *`: NULL (or too small) makes it allocate from the allocator
 * installed with jitops_runtime_set_allocator (below) when there is one, else from the
 * runtime's own memory pool (cuMemAllocFromPoolAsync), freed with cuMemFreeAsync on the op's
 * stream, which keeps it graph-capturable; the pool keeps up to $JITOPS_SCRATCH_KEEP_BYTES
 * (default 256 MiB) of freed memory for the next calls. Each op's header says how many bytes
 * it needs. */
typedef struct jitops_workspace {
  void *ptr;
  size_t bytes;
} jitops_workspace;

/* Where an op takes scratch when the caller passes no workspace large enough: by default the
 * runtime's own memory pool (above); with an allocator installed, the application's. That is
 * how a framework keeps a single pool: PyTorch's caching allocator, say, which then counts
 * the memory and captures it into graphs with the rest.
 *
 * Contract. allocate(user, bytes, stream) returns device memory of at least `bytes` on the
 * runtime's device, usable by work enqueued on `stream` from now on (as cuMemAllocAsync's), or
 * NULL, which fails the op with JITOPS_ERR_OUT_OF_MEMORY. release(user, ptr, bytes, stream)
 * gives it back, in stream order: the op calls it right after enqueueing the kernels that use
 * the memory, before it returns, so the allocator must not hand the memory to work on another
 * stream until those kernels have run (a caching allocator that reuses a block on the stream it
 * was freed on, as PyTorch's does, qualifies). Both may run on any thread that calls an op, at
 * once on several; neither may call back into libjitops. */
typedef struct jitops_allocator {
  void *(*allocate)(void *user, size_t bytes, void *stream);
  void (*release)(void *user, void *ptr, size_t bytes, void *stream);
  void *user;
} jitops_allocator;

/* Installs `allocator` (copied) for the runtime's scratch. At most once per runtime, and
 * before its first op call: a second call gives JITOPS_ERR_ALREADY_EXISTS. Errors:
 * JITOPS_ERR_INVALID_ARGUMENT (NULL runtime, allocator or function). */
JITOPS_API jitops_status jitops_runtime_set_allocator(jitops_runtime_t *runtime,
                                                      const jitops_allocator *allocator);

/* ------------------------------------------------------------------------------------------
 * Catalogue: the common specializations of the built-in ops, for prewarming
 * ---------------------------------------------------------------------------------------- */

/* The number of entries in the prewarm catalogue. */
JITOPS_API size_t jitops_catalogue_size(void);

/* The op family and a short description of entry `index`. */
JITOPS_API jitops_status jitops_catalogue_describe(size_t index, const char **op,
                                                   const char **description);

/* Compiles and caches catalogue entry `index` for the runtime's target. Works on a
 * compile-only runtime. Thread-safe: the tool compiles entries in parallel. */
JITOPS_API jitops_status jitops_catalogue_compile(jitops_runtime_t *runtime, size_t index);

/* ------------------------------------------------------------------------------------------
 * Cache administration (what `jitops-cache` does). Needs no GPU.
 * ---------------------------------------------------------------------------------------- */

typedef struct jitops_cache jitops_cache_t;

/* How jitops_cache_open opens a cache (its `mode`; 0 and 1 keep their meaning of old, when
 * the argument was named `writable`). */
typedef enum jitops_cache_open_mode {
  JITOPS_CACHE_OPEN_READONLY = 0, /* JITOPS_ERR_NOT_FOUND when there is no cache; leaves no
                                     -wal or -shm file behind */
  JITOPS_CACHE_OPEN_CREATE = 1,   /* read-write; creates the directory and database */
  JITOPS_CACHE_OPEN_EXISTING = 2  /* read-write; JITOPS_ERR_NOT_FOUND when there is no cache */
} jitops_cache_open_mode;

/* Opens the cache database in `dir` (NULL: the default location) for administration, as
 * `mode` (a jitops_cache_open_mode) says. Unlike the runtime, it reports problems:
 * JITOPS_ERR_CACHE (unusable or unsafe database), JITOPS_ERR_IO, JITOPS_ERR_NOT_FOUND.
 * A damaged database (one SQLite reports corrupt, a header it refuses or that makes it
 * read-only, our table names with a foreign schema) is set aside as
 * "kernels.db.corrupt-...", as the runtime does, when the directory is writable: a writable
 * open then starts a new, empty database (see jitops_cache_recovered_from), and a read-only
 * one gives JITOPS_ERR_NOT_FOUND. */
JITOPS_API jitops_status jitops_cache_open(const char *dir, int mode, jitops_cache_t **out);
JITOPS_API void jitops_cache_close(jitops_cache_t *cache);

/* The database file (its real path: symlinks on the way are resolved). */
JITOPS_API const char *jitops_cache_path(const jitops_cache_t *cache);

/* Where the open set aside a damaged database before starting a new one; "" when it found
 * none. */
JITOPS_API const char *jitops_cache_recovered_from(const jitops_cache_t *cache);

/* What a runtime created now with the default cache settings would make of the disk cache in
 * `dir` (NULL: the default location), from the environment (JITOPS_CACHE,
 * JITOPS_CACHE_MAX_BYTES) and the directory, creating and changing nothing: the fields mean
 * what jitops_runtime_info's cache_* fields mean. A directory that does not exist yet reads
 * as what the runtime would create. ABI: as jitops_runtime_info, this struct only grows. */
typedef struct jitops_cache_settings {
  jitops_cache_state state;
  int degraded;
  char reason[512];
  int64_t max_bytes; /* -1: unbounded */
  /* The remote tier, from $JITOPS_CACHE_REMOTE and $JITOPS_CACHE_REMOTE_KEY, as
   * jitops_runtime_info's remote_* fields (never SUSPENDED: nothing is contacted). */
  jitops_remote_state remote_state;
  int remote_signed;
  char remote_address[320];
  char remote_reason[512];
} jitops_cache_settings;

JITOPS_API jitops_status jitops_cache_settings_get(const char *dir, jitops_cache_settings *out);

/* An entry is a compiled kernel, or a choice made by timing on a GPU (the cuBLASLt algorithm
 * that runs one of fused linear cross-entropy's GEMM shapes fastest): such an entry has an
 * empty lowered_name, a name_expression that describes the choice, and the GPU's name in
 * options. */
typedef struct jitops_cache_entry {
  uint8_t key[16];
  const char *op; /* the op family ("scan") for a built-in template, else the source name */
  const char *name_expression;
  const char *lowered_name;
  const char *target; /* "sm_90", or "compute_90" for PTX */
  const char *options;
  int nvrtc_version;
  int64_t bytes;
  double compile_ms;
  int64_t created;   /* Unix seconds */
  int64_t last_used; /* Unix seconds */
  int64_t use_count;
} jitops_cache_entry;

/* Calls `visit` for each entry whose op and target match (NULL matches all), most recently
 * used first. A non-zero return from `visit` stops the walk. */
JITOPS_API jitops_status jitops_cache_list(jitops_cache_t *cache, const char *op,
                                           const char *target,
                                           int (*visit)(const jitops_cache_entry *, void *),
                                           void *user);

typedef struct jitops_cache_group_stats {
  const char *op;
  const char *target;
  int64_t entries;
  int64_t bytes;
  int64_t memory_hits; /* as flushed by runtimes when they were destroyed */
  int64_t disk_hits;
  int64_t misses;
  int64_t compiles;
  int64_t remote_hits; /* appended: jitops_stats's remote counters, as flushed */
  int64_t remote_misses;
  int64_t remote_errors;
} jitops_cache_group_stats;

/* Calls `visit` once per (op, target) group. */
JITOPS_API jitops_status jitops_cache_stats(jitops_cache_t *cache,
                                            int (*visit)(const jitops_cache_group_stats *, void *),
                                            void *user);

/* Removes entries of `op` (NULL: any) last used more than `older_than_days` days ago (< 0:
 * regardless of age). `removed` (may be NULL) counts them. Clearing everything (NULL, < 0)
 * also deletes the damaged databases set aside beside the cache (at most the 2 newest are
 * ever kept). */
JITOPS_API jitops_status jitops_cache_clear(jitops_cache_t *cache, const char *op,
                                            double older_than_days, int64_t *removed);

/* Checks every row and deletes those that fail: a row's stored hash must match its blob
 * and all that selects code from it (key, kind, target, lowered name), and its other
 * columns must be sane. `checked` and `dropped` (may be NULL) count them. */
JITOPS_API jitops_status jitops_cache_verify(jitops_cache_t *cache, int64_t *checked,
                                             int64_t *dropped);

/* Writes a compact copy of the database to `file`, which must not exist; it is created with
 * mode 0600, like the cache. */
JITOPS_API jitops_status jitops_cache_export(jitops_cache_t *cache, const char *file);

/* Adds the entries of an exported file that are not present yet. Nothing in the file is
 * trusted: a row is rejected (and counted in `rejected`) unless it passes the checks of
 * jitops_cache_verify, with its size equal to its blob's length, a known kind, a target such
 * as sm_90 and text of sane lengths. The hash guards against damage and mix-ups, not against
 * a forger: import only files you would run code from. The import commits in batches (so a
 * runtime storing a kernel meanwhile waits for one batch at most); after a failure the
 * entries already committed stay, and `imported` counts them. */
JITOPS_API jitops_status jitops_cache_import(jitops_cache_t *cache, const char *file,
                                             int64_t *imported, int64_t *rejected);

/* Copies every kernel of `cache` to the remote tier at `remote` (NULL: $JITOPS_CACHE_REMOTE),
 * signed with `key` (NULL: $JITOPS_CACHE_REMOTE_KEY; "": unsigned), replacing what the server
 * holds under the same keys. Rows that fail jitops_cache_verify's checks, and timed choices,
 * are not sent. `pushed` (may be NULL) counts what was sent. Unlike a runtime, it reports the
 * server's problems: JITOPS_ERR_IO (it cannot be reached, or refused a command; the kernels
 * sent before stay), JITOPS_ERR_INVALID_ARGUMENT (no or a malformed address),
 * JITOPS_ERR_UNSUPPORTED (a build without hiredis). Waits up to 2 s for each request. */
JITOPS_API jitops_status jitops_cache_push(jitops_cache_t *cache, const char *remote,
                                           const char *key, int64_t *pushed);

/* Adds to `cache` (opened writable) every kernel of the remote tier that it does not hold,
 * for any target. Each record is checked as a runtime checks a remote hit (and, with a key,
 * its signature); one that fails is counted in `rejected` and skipped. Errors as
 * jitops_cache_push's, and JITOPS_ERR_CACHE for the database. */
JITOPS_API jitops_status jitops_cache_pull(jitops_cache_t *cache, const char *remote,
                                           const char *key, int64_t *pulled, int64_t *rejected);

#ifdef __cplusplus
}
#endif

#include "jitops/flce.h"
#include "jitops/repeat.h"
#include "jitops/scan.h"
#include "jitops/segment.h"
#include "jitops/ctc.h"

#endif /* JITOPS_JITOPS_H */
