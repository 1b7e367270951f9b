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

/* A grid or block: an int (anything with __index__, a NumPy integer say) or 1 to 3 of them. */
static int read_dim3(PyObject *obj, const char *arg, uint32_t out[3]) {
  int64_t values[3] = {1, 1, 1};
  int count = 1;
  /* An int first; an object that is an int only when it holds one number (a NumPy array)
   * falls through to the sequence. */
  PyObject *index = PyIndex_Check(obj) ? PyNumber_Index(obj) : NULL;
  if (index == NULL)
    PyErr_Clear();
  if (index != NULL) {
    int status = jp_arg_int64(index, arg, &values[0]);
    Py_DECREF(index);
    if (status < 0)
      return -1;
  } else {
    PyObject *seq = PySequence_Check(obj) ? PySequence_Tuple(obj) : NULL;
    if (seq == NULL) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "%s takes an int or a sequence of 1 to 3 ints", arg);
      return -1;
    }
    Py_ssize_t n = PyTuple_Size(seq);
    int status = n >= 1 && n <= 3 ? 0 : -1;
    if (status < 0)
      PyErr_Format(PyExc_ValueError, "%s takes 1 to 3 dimensions; got %zd", arg, n);
    for (Py_ssize_t i = 0; status == 0 && i < n; ++i)
      status = jp_arg_int64(PyTuple_GetItem(seq, i), arg, &values[i]);
    count = (int)n;
    Py_DECREF(seq);
    if (status < 0)
      return -1;
  }
  for (int i = 0; i < count; ++i)
    if (values[i] < 1 || values[i] > UINT32_MAX) {
      PyErr_Format(PyExc_ValueError, "%s[%d] = %lld; each must be in [1, 2^32)", arg, i,
                   (long long)values[i]);
      return -1;
    }
  for (int i = 0; i < 3; ++i)
    out[i] = (uint32_t)values[i];
  return 0;
}

enum { MAX_KERNEL_ARGS = 256 };

/* A launch's argument values as cuLaunchKernel takes them: a pointer to each one's bytes. An
 * int is a device address (its 8 bytes are kept in `addresses`); a bytes object is a scalar's
 * bytes, read in place (the caller's tuple holds it through the launch). The Python side
 * turns every argument into one of the two. */
typedef struct kernel_values {
  Py_ssize_t count, producer_count;
  void *pointers[MAX_KERNEL_ARGS];
  size_t sizes[MAX_KERNEL_ARGS];
  uintptr_t addresses[MAX_KERNEL_ARGS];
  void *producers[MAX_KERNEL_ARGS]; /* streams to wait for before the launch */
} kernel_values;

static int read_values(PyObject *tuple, kernel_values *v) {
  v->count = PyTuple_Size(tuple);
  if (v->count > MAX_KERNEL_ARGS) {
    PyErr_Format(PyExc_ValueError, "a kernel takes at most %d arguments; got %zd", MAX_KERNEL_ARGS,
                 v->count);
    return -1;
  }
  for (Py_ssize_t i = 0; i < v->count; ++i) {
    PyObject *value = PyTuple_GetItem(tuple, i);
    if (PyLong_Check(value)) {
      if (jp_arg_pointer(value, "an array's address", (void **)&v->addresses[i]) < 0)
        return -1;
      v->pointers[i] = &v->addresses[i];
      v->sizes[i] = sizeof(void *);
      continue;
    }
    char *bytes;
    Py_ssize_t size;
    if (!PyBytes_Check(value) || PyBytes_AsStringAndSize(value, &bytes, &size) < 0) {
      PyErr_Format(PyExc_TypeError, "kernel_launch: value %zd must be an int address or bytes", i);
      return -1;
    }
    v->pointers[i] = bytes;
    v->sizes[i] = (size_t)size;
  }
  return 0;
}

/* TypeError where the values' number or sizes differ from the kernel's parameters (`sizes`,
 * a tuple of ints; None: the driver could not say, and nothing is checked). */
static int check_values(const kernel_values *v, PyObject *sizes, PyObject *name) {
  if (sizes == Py_None)
    return 0;
  Py_ssize_t want = PyTuple_Size(sizes);
  if (want != v->count) {
    PyErr_Format(PyExc_TypeError, "%U takes %zd arguments; got %zd", name, want, v->count);
    return -1;
  }
  for (Py_ssize_t i = 0; i < want; ++i) {
    size_t expected = PyLong_AsSize_t(PyTuple_GetItem(sizes, i));
    if (expected != v->sizes[i]) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_TypeError,
                     "kernel argument %zd of %U is %zu bytes; its parameter takes %zu", i, name,
                     v->sizes[i], expected);
      return -1;
    }
  }
  return 0;
}

/* Reads `producers` (a tuple of stream handles) into the values, with the GIL. */
static int read_producers(PyObject *producers, kernel_values *v) {
  v->producer_count = PyTuple_Size(producers);
  if (v->producer_count > MAX_KERNEL_ARGS) {
    PyErr_SetString(PyExc_ValueError, "kernel_launch: more producer streams than arguments");
    return -1;
  }
  for (Py_ssize_t i = 0; i < v->producer_count; ++i)
    if (jp_arg_pointer(PyTuple_GetItem(producers, i), "producers[i]", &v->producers[i]) < 0)
      return -1;
  return 0;
}

/* Orders `stream` after each producer stream; called without the GIL. */
static jitops_status wait_for_producers(jitops_runtime_t *runtime, void *stream,
                                        const kernel_values *v) {
  for (Py_ssize_t i = 0; i < v->producer_count; ++i) {
    jitops_status status = jitops_stream_wait(runtime, stream, v->producers[i]);
    if (status != JITOPS_SUCCESS)
      return status;
  }
  return JITOPS_SUCCESS;
}

/* kernel_launch(kernel, grid, block, shared_mem, stream, values: tuple, param_sizes: tuple |
 * None, name: str, runtime, producers: tuple): the values are checked first, then the stream
 * waits for the producers' streams, then the kernel is launched. */
static PyObject *kernel_launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  void *kernel, *stream;
  jitops_launch_params params;
  int shared;
  void *runtime;
  if (jp_arg_count("kernel_launch", nargs, 10) < 0 ||
      jp_arg_pointer(args[0], "kernel", &kernel) < 0 || read_dim3(args[1], "grid", params.grid) ||
      read_dim3(args[2], "block", params.block) || jp_arg_int(args[3], "shared_mem", &shared) < 0 ||
      jp_arg_pointer(args[4], "stream", &stream) < 0 ||
      jp_arg_pointer(args[8], "runtime", &runtime) < 0)
    return NULL;
  if (!PyTuple_Check(args[5]) || (args[6] != Py_None && !PyTuple_Check(args[6])) ||
      !PyUnicode_Check(args[7]) || !PyTuple_Check(args[9])) {
    PyErr_SetString(PyExc_TypeError,
                    "kernel_launch: values, param_sizes and producers must be tuples, name a str");
    return NULL;
  }
  if (shared < 0) {
    PyErr_SetString(PyExc_ValueError, "shared_mem must be >= 0");
    return NULL;
  }
  params.shared_bytes = (uint32_t)shared;
  params.stream = stream;
  kernel_values values; /* 8 KiB */
  if (read_values(args[5], &values) < 0 || check_values(&values, args[6], args[7]) < 0 ||
      read_producers(args[9], &values) < 0)
    return NULL;
  /* cuLaunchKernel copies the values before it returns; it may block (a full launch queue, a
   * module's first launch), so other threads run meanwhile. */
  PyThreadState *save = PyEval_SaveThread();
  jitops_status status = wait_for_producers(runtime, stream, &values);
  if (status == JITOPS_SUCCESS)
    status = jitops_kernel_launch(kernel, &params, values.pointers);
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

/* pointer_check(runtime, address): InvalidDeviceError where the address is another device's
 * memory. */
static PyObject *pointer_check(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  void *runtime, *address;
  if (jp_arg_count("pointer_check", nargs, 2) < 0 ||
      jp_arg_pointer(args[0], "runtime", &runtime) < 0 ||
      jp_arg_pointer(args[1], "address", &address) < 0)
    return NULL;
  jitops_status status = jitops_pointer_check(runtime, address);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  Py_RETURN_NONE;
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
    {"pointer_check", JP_FASTCALL(pointer_check), METH_FASTCALL, NULL},
    {"catalogue_size", catalogue_size, METH_NOARGS, NULL},
    {"catalogue_describe", catalogue_describe, METH_O, NULL},
    {"catalogue_compile", JP_FASTCALL(catalogue_compile), METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}};
