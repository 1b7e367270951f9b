/* The core API: runtimes, the JIT service and the prewarm catalogue. */
#include "binding.h"

/* runtime_create(device, arch, cache_dir, cache_mode, cache_max_bytes, shipped_cache) -> int */
static PyObject *runtime_create(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  jitops_runtime_config config;
  jitops_runtime_config_init(&config);
  int mode;
  if (jp_arg_count("runtime_create", nargs, 6) < 0 ||
      jp_arg_int(args[0], "device", &config.device) < 0 ||
      jp_arg_string(args[1], "arch", &config.arch) < 0 ||
      jp_arg_string(args[2], "cache_dir", &config.cache_dir) < 0 ||
      jp_arg_int(args[3], "cache_mode", &mode) < 0 ||
      jp_arg_int64(args[4], "cache_max_bytes", &config.cache_max_bytes) < 0 ||
      jp_arg_string(args[5], "shipped_cache", &config.shipped_cache) < 0)
    return NULL;
  config.cache_mode = (jitops_cache_mode)mode;
  jitops_runtime_t *runtime = NULL;
  PyThreadState *save = PyEval_SaveThread();
  jitops_status status = jitops_runtime_create(&config, &runtime);
  PyEval_RestoreThread(save);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  return PyLong_FromVoidPtr(runtime);
}

static PyObject *runtime_destroy(PyObject *self, PyObject *arg) {
  void *runtime;
  if (jp_arg_pointer(arg, "runtime", &runtime) < 0)
    return NULL;
  PyThreadState *save = PyEval_SaveThread();
  jitops_runtime_destroy(runtime);
  PyEval_RestoreThread(save);
  Py_RETURN_NONE;
}

/* runtime_info(runtime) -> (device, has_device, arch, nvrtc_version, arch_name, device_name,
 *                           cache_path, cache_writable, cache_state, cache_degraded,
 *                           cache_reason, cache_max_bytes) */
static PyObject *runtime_info(PyObject *self, PyObject *arg) {
  void *runtime;
  jitops_runtime_info info;
  if (jp_arg_pointer(arg, "runtime", &runtime) < 0)
    return NULL;
  jitops_status status = jitops_runtime_get_info(runtime, &info);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  return Py_BuildValue("(iiiisssiiisL)", info.device, info.has_device, info.arch,
                       info.nvrtc_version, info.arch_name, info.device_name, info.cache_path,
                       info.cache_writable, (int)info.cache_state, info.cache_degraded,
                       info.cache_reason, (long long)info.cache_max_bytes);
}

/* runtime_stats(runtime) -> (memory_hits, disk_hits, misses, compiles, compile_errors, waits,
 *                            disk_errors, compile_ms, remote_hits, remote_misses,
 *                            remote_errors, shared_hits, quick_compiles) */
static PyObject *runtime_stats(PyObject *self, PyObject *arg) {
  void *runtime;
  jitops_stats s;
  if (jp_arg_pointer(arg, "runtime", &runtime) < 0)
    return NULL;
  jitops_status status = jitops_runtime_get_stats(runtime, &s);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  return Py_BuildValue("(KKKKKKKdKKKKK)", (unsigned long long)s.memory_hits,
                       (unsigned long long)s.disk_hits, (unsigned long long)s.misses,
                       (unsigned long long)s.compiles, (unsigned long long)s.compile_errors,
                       (unsigned long long)s.waits, (unsigned long long)s.disk_errors, s.compile_ms,
                       (unsigned long long)s.remote_hits, (unsigned long long)s.remote_misses,
                       (unsigned long long)s.remote_errors, (unsigned long long)s.shared_hits,
                       (unsigned long long)s.quick_compiles);
}

/* runtime_wait_builds(runtime): returns once the runtime's background builds are done. */
static PyObject *runtime_wait_builds(PyObject *self, PyObject *arg) {
  void *runtime;
  if (jp_arg_pointer(arg, "runtime", &runtime) < 0)
    return NULL;
  PyThreadState *save = PyEval_SaveThread();
  jitops_status status = jitops_runtime_wait_builds(runtime);
  PyEval_RestoreThread(save);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  Py_RETURN_NONE;
}

/* source_register(runtime, name, source) */
static PyObject *source_register(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  void *runtime;
  const char *name, *source;
  if (jp_arg_count("source_register", nargs, 3) < 0 ||
      jp_arg_pointer(args[0], "runtime", &runtime) < 0 ||
      jp_arg_string(args[1], "name", &name) < 0 || jp_arg_string(args[2], "source", &source) < 0)
    return NULL;
  jitops_status status = jitops_source_register(runtime, name, source);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  Py_RETURN_NONE;
}

/* kernel_get(runtime, source_name, name_expression, options: tuple[str]) ->
 * (kernel, lowered_name). Compiling can take a second: the GIL is released. */
static PyObject *kernel_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  void *runtime;
  const char *source, *expression;
  if (jp_arg_count("kernel_get", nargs, 4) < 0 ||
      jp_arg_pointer(args[0], "runtime", &runtime) < 0 ||
      jp_arg_string(args[1], "source", &source) < 0 ||
      jp_arg_string(args[2], "name_expression", &expression) < 0)
    return NULL;
  if (!PyTuple_Check(args[3])) {
    PyErr_SetString(PyExc_TypeError, "options must be a tuple of str");
    return NULL;
  }
  Py_ssize_t count = PyTuple_Size(args[3]);
  const char **options = PyMem_Calloc(count ? (size_t)count : 1, sizeof *options);
  if (options == NULL)
    return PyErr_NoMemory();
  for (Py_ssize_t i = 0; i < count; ++i) {
    if (jp_arg_string(PyTuple_GetItem(args[3], i), "options[i]", &options[i]) < 0 ||
        options[i] == NULL) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "options must be a tuple of str");
      PyMem_Free(options);
      return NULL;
    }
  }
  jitops_kernel_t *kernel = NULL;
  PyThreadState *save = PyEval_SaveThread();
  jitops_status status =
      jitops_kernel_get(runtime, source, expression, options, (size_t)count, &kernel);
  PyEval_RestoreThread(save);
  PyMem_Free(options);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  return Py_BuildValue("(Ns)", PyLong_FromVoidPtr(kernel), jitops_kernel_lowered_name(kernel));
}

static int read_dim3(PyObject *obj, const char *arg, uint32_t out[3]) {
  int64_t values[3] = {1, 1, 1};
  int count;
  if (jp_arg_int64_list(obj, arg, values, 3, &count) < 0)
    return -1;
  for (int i = 0; i < 3; ++i) {
    if (values[i] < 1 || values[i] > UINT32_MAX) {
      PyErr_Format(PyExc_ValueError, "%s[%d] = %lld; each must be in [1, 2^32)", arg, i,
                   (long long)values[i]);
      return -1;
    }
    out[i] = (uint32_t)values[i];
  }
  return 0;
}

/* kernel_launch(kernel, grid: tuple, block: tuple, shared_bytes, stream, packed: bytes,
 *               offsets: tuple[int]): argument i lives at packed[offsets[i]:]. */
static PyObject *kernel_launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  void *kernel, *stream;
  jitops_launch_params params;
  int shared;
  char *packed;
  Py_ssize_t packed_size;
  if (jp_arg_count("kernel_launch", nargs, 7) < 0 ||
      jp_arg_pointer(args[0], "kernel", &kernel) < 0 || read_dim3(args[1], "grid", params.grid) ||
      read_dim3(args[2], "block", params.block) || jp_arg_int(args[3], "shared_mem", &shared) < 0 ||
      jp_arg_pointer(args[4], "stream", &stream) < 0 ||
      PyBytes_AsStringAndSize(args[5], &packed, &packed_size) < 0)
    return NULL;
  if (shared < 0) {
    PyErr_SetString(PyExc_ValueError, "shared_mem must be >= 0");
    return NULL;
  }
  params.shared_bytes = (uint32_t)shared;
  params.stream = stream;
  enum { MAX_ARGS = 256 };
  void *pointers[MAX_ARGS];
  int64_t offsets[MAX_ARGS];
  int count;
  if (jp_arg_int64_list(args[6], "args", offsets, MAX_ARGS, &count) < 0)
    return NULL;
  for (int i = 0; i < count; ++i) {
    if (offsets[i] < 0 || offsets[i] >= packed_size) {
      PyErr_SetString(PyExc_ValueError, "kernel_launch: argument offset out of the packed bytes");
      return NULL;
    }
    pointers[i] = packed + offsets[i];
  }
  /* The arguments live in `packed`, which the caller's argument tuple holds. cuLaunchKernel
   * may block (a full launch queue, a module's first launch), so other threads run. */
  PyThreadState *save = PyEval_SaveThread();
  jitops_status status = jitops_kernel_launch(kernel, &params, pointers);
  PyEval_RestoreThread(save);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  Py_RETURN_NONE;
}

/* kernel_params(kernel) -> tuple[int, ...] | None: the byte size of each parameter of the
 * kernel, or None where the library cannot say (a compile-only runtime, a driver older than
 * CUDA 12.4). */
static PyObject *kernel_params(PyObject *self, PyObject *arg) {
  (void)self;
  void *kernel;
  if (jp_arg_pointer(arg, "kernel", &kernel) < 0)
    return NULL;
  enum { MAX_PARAMS = 4096 }; /* more than a kernel's 32 KiB of parameters can hold */
  PyObject *sizes = PyList_New(0);
  if (sizes == NULL)
    return NULL;
  for (size_t index = 0; index < MAX_PARAMS; ++index) {
    size_t offset, size;
    jitops_status status = jitops_kernel_param_info(kernel, index, &offset, &size);
    if (status == JITOPS_ERR_OUT_OF_RANGE)
      break;
    if (status == JITOPS_ERR_NO_DEVICE || status == JITOPS_ERR_UNSUPPORTED) {
      Py_DECREF(sizes);
      Py_RETURN_NONE;
    }
    PyObject *item = status == JITOPS_SUCCESS ? PyLong_FromSize_t(size) : jp_raise(status);
    if (item == NULL || PyList_Append(sizes, item) < 0) {
      Py_XDECREF(item);
      Py_DECREF(sizes);
      return NULL;
    }
    Py_DECREF(item);
  }
  PyObject *result = PyList_AsTuple(sizes);
  Py_DECREF(sizes);
  return result;
}

/* dlpack_address(capsule) -> int: the address of the first element of a "dltensor" capsule's
 * tensor (data + byte_offset). The capsule is not consumed: its destructor returns the tensor
 * to its producer. */
static PyObject *dlpack_address(PyObject *self, PyObject *capsule) {
  DLManagedTensor *managed = PyCapsule_GetPointer(capsule, "dltensor");
  if (managed == NULL)
    return NULL;
  return PyLong_FromVoidPtr((char *)managed->dl_tensor.data + managed->dl_tensor.byte_offset);
}

static PyObject *catalogue_size(PyObject *self, PyObject *unused) {
  return PyLong_FromSize_t(jitops_catalogue_size());
}

static PyObject *catalogue_describe(PyObject *self, PyObject *arg) {
  int64_t index;
  const char *op, *description;
  if (jp_arg_int64(arg, "index", &index) < 0)
    return NULL;
  jitops_status status = jitops_catalogue_describe((size_t)index, &op, &description);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  return Py_BuildValue("(ss)", op, description);
}

/* catalogue_compile(runtime, index): compiles and caches one entry, without the GIL. */
static PyObject *catalogue_compile(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  void *runtime;
  int64_t index;
  if (jp_arg_count("catalogue_compile", nargs, 2) < 0 ||
      jp_arg_pointer(args[0], "runtime", &runtime) < 0 ||
      jp_arg_int64(args[1], "index", &index) < 0)
    return NULL;
  PyThreadState *save = PyEval_SaveThread();
  jitops_status status = jitops_catalogue_compile(runtime, (size_t)index);
  PyEval_RestoreThread(save);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  Py_RETURN_NONE;
}

PyMethodDef jp_core_methods[] = {
    {"runtime_create", JP_FASTCALL(runtime_create), METH_FASTCALL, NULL},
    {"runtime_destroy", runtime_destroy, METH_O, NULL},
    {"runtime_info", runtime_info, METH_O, NULL},
    {"runtime_stats", runtime_stats, METH_O, NULL},
    {"runtime_wait_builds", runtime_wait_builds, METH_O, NULL},
    {"source_register", JP_FASTCALL(source_register), METH_FASTCALL, NULL},
    {"kernel_get", JP_FASTCALL(kernel_get), METH_FASTCALL, NULL},
    {"kernel_launch", JP_FASTCALL(kernel_launch), METH_FASTCALL, NULL},
    {"kernel_params", kernel_params, METH_O, NULL},
    {"dlpack_address", dlpack_address, METH_O, NULL},
    {"catalogue_size", catalogue_size, METH_NOARGS, NULL},
    {"catalogue_describe", catalogue_describe, METH_O, NULL},
    {"catalogue_compile", JP_FASTCALL(catalogue_compile), METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}};
