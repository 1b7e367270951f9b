/* The module object: initialization, the exception classes and dtype table that the Python
 * side registers at import, and the small shared helpers of binding.h. */
#include "binding.h"

/* Set once by jitops._errors at import: a tuple indexed by jitops_status. */
static PyObject *error_classes;
/* Set once by the torch layer: {torch.dtype: (DLDataTypeCode, bits)}. */
PyObject *jp_dtype_table;
/* Set once by the torch layer: allocator(bytes, device) -> a tensor owning device memory. */
static PyObject *workspace_allocator;
/* Set once by the torch layer: provider(device) -> the handle of that device's shared runtime. */
static PyObject *runtime_provider;
/* Interned attribute names, made at module init. */
PyObject *jp_name_data_ptr, *jp_name_shape, *jp_name_stride, *jp_name_dtype, *jp_name_get_device;

PyObject *jp_raise(jitops_status status) {
  const char *message = jitops_last_error();
  PyObject *cls = NULL;
  if (error_classes != NULL && (Py_ssize_t)status < PyTuple_Size(error_classes))
    cls = PyTuple_GetItem(error_classes, (Py_ssize_t)status);
  if (cls == NULL) {
    PyErr_Clear();
    cls = PyExc_RuntimeError;
  }
  PyErr_Format(cls, "%s", message[0] ? message : jitops_status_string(status));
  return NULL;
}

int jp_workspace(size_t bytes, int device, PyObject **holder, jitops_workspace *out) {
  *holder = NULL;
  out->ptr = NULL;
  out->bytes = 0;
  if (bytes == 0)
    return 0;
  if (workspace_allocator == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "jitops._C: no workspace allocator registered");
    return -1;
  }
  PyObject *nbytes = PyLong_FromSize_t(bytes), *dev = PyLong_FromLong(device);
  PyObject *tensor =
      nbytes && dev ? PyObject_CallFunctionObjArgs(workspace_allocator, nbytes, dev, NULL) : NULL;
  Py_XDECREF(nbytes);
  Py_XDECREF(dev);
  if (tensor == NULL)
    return -1;
  PyObject *ptr = PyObject_CallMethodObjArgs(tensor, jp_name_data_ptr, NULL);
  if (ptr == NULL) {
    Py_DECREF(tensor);
    return -1;
  }
  out->ptr = PyLong_AsVoidPtr(ptr);
  Py_DECREF(ptr);
  out->bytes = bytes;
  *holder = tensor;
  return 0;
}

/* The status an exception stands for: a jitops.Error's own, else JITOPS_ERR_INTERNAL. */
static int status_of(PyObject *exception) {
  PyObject *status = exception ? PyObject_GetAttrString(exception, "status") : NULL;
  long value = status ? PyLong_AsLong(status) : -1;
  Py_XDECREF(status);
  PyErr_Clear();
  return value > 0 ? (int)value : JITOPS_ERR_INTERNAL;
}

/* What libjitops_torch calls, from any thread, the first time it meets a device: the handle
 * of jitops.Runtime(device), the runtime the rest of the package uses there too. Returns a
 * jitops_status; on failure `message` holds the exception's text. */
static int provide_runtime(int device, jitops_runtime_t **out, char *message, size_t size) {
  PyGILState_STATE gil = PyGILState_Ensure();
  int status = JITOPS_SUCCESS;
  PyObject *handle = runtime_provider ? PyObject_CallFunction(runtime_provider, "i", device) : NULL;
  *out = handle ? PyLong_AsVoidPtr(handle) : NULL;
  Py_XDECREF(handle);
  if (*out == NULL) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    Py_ssize_t length;
    const char *utf8 = text ? PyUnicode_AsUTF8AndSize(text, &length) : NULL;
    snprintf(message, size, "%s", utf8 ? utf8 : "no runtime provider is registered");
    status = status_of(value);
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    PyErr_Clear();
  }
  PyGILState_Release(gil);
  return status;
}

PyObject *jp_done(jp_mode mode, int validated) {
  if (mode == JP_SIZE)
    return PyLong_FromLong(0);
  if (mode == JP_RUN)
    Py_RETURN_NONE;
  return PyBool_FromLong(validated);
}

PyObject *jp_finish(jp_mode mode, jitops_status size_status, size_t bytes, int device,
                    jp_op_run run, void *ctx) {
  if (size_status != JITOPS_SUCCESS)
    return jp_raise(size_status);
  if (mode == JP_VALIDATE)
    return jp_done(mode, 1);
  if (mode == JP_SIZE)
    return PyLong_FromSize_t(bytes);
  PyObject *holder;
  jitops_workspace workspace;
  if (jp_workspace(bytes, device, &holder, &workspace) < 0)
    return NULL;
  PyThreadState *save = PyEval_SaveThread();
  jitops_status status = run(ctx, &workspace);
  PyEval_RestoreThread(save);
  Py_XDECREF(holder);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  Py_RETURN_NONE;
}

int jp_arg_mode_runtime(PyObject *const *args, jp_mode *mode, jitops_runtime_t **runtime) {
  int value;
  if (jp_arg_int(args[0], "mode", &value) < 0 ||
      jp_arg_pointer(args[1], "runtime", (void **)runtime) < 0)
    return -1;
  if (value < JP_RUN || value > JP_SIZE) {
    PyErr_Format(PyExc_ValueError, "mode must be 0 (run), 1 (validate) or 2 (size); got %d", value);
    return -1;
  }
  *mode = (jp_mode)value;
  return 0;
}

int jp_arg_count(const char *fn, Py_ssize_t nargs, Py_ssize_t expected) {
  if (nargs == expected)
    return 0;
  PyErr_Format(PyExc_TypeError, "jitops._C.%s takes %zd arguments (%zd given)", fn, expected,
               nargs);
  return -1;
}

int jp_arg_pointer(PyObject *obj, const char *arg, void **out) {
  if (obj == Py_None) {
    *out = NULL;
    return 0;
  }
  *out = PyLong_AsVoidPtr(obj);
  if (*out == NULL && PyErr_Occurred()) {
    PyErr_Format(PyExc_TypeError, "%s must be an address (int)", arg);
    return -1;
  }
  return 0;
}

int jp_arg_int64(PyObject *obj, const char *arg, int64_t *out) {
  long long value = PyLong_AsLongLong(obj);
  if (value == -1 && PyErr_Occurred()) {
    /* An int too wide is an OverflowError, as Python's own conversions say; anything else
     * that is not an int (nor has __index__) a TypeError. */
    int overflow = PyErr_ExceptionMatches(PyExc_OverflowError);
    PyErr_Clear();
    PyErr_Format(overflow ? PyExc_OverflowError : PyExc_TypeError,
                 overflow ? "%s does not fit int64" : "%s must be an int", arg);
    return -1;
  }
  *out = value;
  return 0;
}

int jp_arg_int(PyObject *obj, const char *arg, int *out) {
  int64_t value;
  if (jp_arg_int64(obj, arg, &value) < 0)
    return -1;
  if (value < INT32_MIN || value > INT32_MAX) {
    PyErr_Format(PyExc_OverflowError, "%s = %lld does not fit a C int", arg, (long long)value);
    return -1;
  }
  *out = (int)value;
  return 0;
}

int jp_arg_double(PyObject *obj, const char *arg, double *out) {
  double value = PyFloat_AsDouble(obj);
  if (value == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s must be a number", arg);
    return -1;
  }
  *out = value;
  return 0;
}

int jp_arg_string(PyObject *obj, const char *arg, const char **out) {
  if (obj == Py_None) {
    *out = NULL;
    return 0;
  }
  Py_ssize_t size;
  *out = PyUnicode_Check(obj) ? PyUnicode_AsUTF8AndSize(obj, &size) : NULL;
  if (*out == NULL) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s must be a str", arg);
    return -1;
  }
  return 0;
}

int jp_arg_int64_list(PyObject *obj, const char *arg, int64_t *out, int max, int *count) {
  PyObject *seq = PySequence_Tuple(obj);
  if (seq == NULL) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s must be a sequence of ints", arg);
    return -1;
  }
  Py_ssize_t n = PyTuple_Size(seq);
  int status = 0;
  if (n > max) {
    PyErr_Format(PyExc_ValueError, "%s has %zd entries; at most %d are supported", arg, n, max);
    status = -1;
  }
  for (Py_ssize_t i = 0; status == 0 && i < n; ++i)
    status = jp_arg_int64(PyTuple_GetItem(seq, i), arg, &out[i]);
  Py_DECREF(seq);
  *count = (int)n;
  return status;
}

/* ---- registration, called once by the Python side at import ----------------------------- */

static PyObject *replace_global(PyObject **slot, PyObject *value) {
  PyObject *old = *slot;
  Py_XINCREF(value);
  *slot = value;
  Py_XDECREF(old);
  Py_RETURN_NONE;
}

static PyObject *set_error_classes(PyObject *self, PyObject *classes) {
  if (!PyTuple_Check(classes)) {
    PyErr_SetString(PyExc_TypeError, "_set_error_classes takes a tuple of classes");
    return NULL;
  }
  return replace_global(&error_classes, classes);
}

static PyObject *set_dtype_table(PyObject *self, PyObject *table) {
  if (!PyDict_Check(table)) {
    PyErr_SetString(PyExc_TypeError, "_set_dtype_table takes a dict");
    return NULL;
  }
  return replace_global(&jp_dtype_table, table);
}

static PyObject *set_workspace_allocator(PyObject *self, PyObject *allocator) {
  if (!PyCallable_Check(allocator)) {
    PyErr_SetString(PyExc_TypeError, "_set_workspace_allocator takes a callable");
    return NULL;
  }
  return replace_global(&workspace_allocator, allocator);
}

static PyObject *set_runtime_provider(PyObject *self, PyObject *provider) {
  if (!PyCallable_Check(provider)) {
    PyErr_SetString(PyExc_TypeError, "_set_runtime_provider takes a callable");
    return NULL;
  }
  return replace_global(&runtime_provider, provider);
}

static PyObject *runtime_provider_address(PyObject *self, PyObject *unused) {
  return PyLong_FromVoidPtr((void *)provide_runtime);
}

static PyObject *version(PyObject *self, PyObject *unused) {
  return PyUnicode_FromString(jitops_version_string());
}

static PyObject *status_string(PyObject *self, PyObject *status) {
  int value;
  if (jp_arg_int(status, "status", &value) < 0)
    return NULL;
  return PyUnicode_FromString(jitops_status_string((jitops_status)value));
}

static PyMethodDef module_methods[] = {
    {"_set_error_classes", set_error_classes, METH_O, "Registers the exception classes."},
    {"_set_dtype_table", set_dtype_table, METH_O, "Registers {dtype: (code, bits)}."},
    {"_set_workspace_allocator", set_workspace_allocator, METH_O,
     "Registers allocator(bytes, device) -> tensor, for op workspaces."},
    {"_set_runtime_provider", set_runtime_provider, METH_O,
     "Registers provider(device) -> runtime handle, for the torch layer."},
    {"runtime_provider_address", runtime_provider_address, METH_NOARGS,
     "The address of the C function through which the torch layer asks for runtimes."},
    {"version", version, METH_NOARGS, "The C library's version string."},
    {"status_string", status_string, METH_O, "The name of a jitops_status."},
    {NULL, NULL, 0, NULL}};

static int add_methods(PyObject *module, PyMethodDef *methods) {
  PyObject *name = PyModule_GetNameObject(module);
  if (name == NULL)
    return -1;
  int status = 0;
  for (PyMethodDef *m = methods; status == 0 && m->ml_name != NULL; ++m) {
    PyObject *fn = PyCFunction_NewEx(m, module, name);
    status = fn ? PyModule_AddObject(module, m->ml_name, fn) : -1;
    if (status < 0)
      Py_XDECREF(fn);
  }
  Py_DECREF(name);
  return status;
}

static int intern_names(void) {
  jp_name_data_ptr = PyUnicode_InternFromString("data_ptr");
  jp_name_shape = PyUnicode_InternFromString("shape");
  jp_name_stride = PyUnicode_InternFromString("stride");
  jp_name_dtype = PyUnicode_InternFromString("dtype");
  jp_name_get_device = PyUnicode_InternFromString("get_device");
  return jp_name_data_ptr && jp_name_shape && jp_name_stride && jp_name_dtype && jp_name_get_device
             ? 0
             : -1;
}

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "jitops._C",
    "The C layer of jitops: libjitops' API, one function per entry point.",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL};

PyMODINIT_FUNC PyInit__C(void) {
  if (intern_names() < 0)
    return NULL;
  PyObject *module = PyModule_Create(&module_def);
  if (module == NULL)
    return NULL;
  PyMethodDef *parts[] = {jp_core_methods,    jp_cache_methods,  jp_ctc_methods, jp_scan_methods,
                          jp_segment_methods, jp_repeat_methods, jp_flce_methods};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; ++i) {
    if (add_methods(module, parts[i]) < 0) {
      Py_DECREF(module);
      return NULL;
    }
  }
  return module;
}
