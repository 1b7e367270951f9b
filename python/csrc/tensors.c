/* Tensor objects to DLTensors (see binding.h). */
#include "binding.h"

extern PyObject *jp_dtype_table;
extern PyObject *jp_name_data_ptr, *jp_name_shape, *jp_name_stride, *jp_name_dtype,
    *jp_name_get_device;

/* What stands for the data of a fake tensor: non-NULL and aligned for every dtype and vector
 * width the ops check. */
#define JP_FAKE_ADDRESS ((void *)(uintptr_t)(1u << 20))

/* Reads a tuple of sizes or strides. Returns JP_OK, JP_SYMBOLIC or -1. */
static int read_dims(PyObject *tuple, jp_mode mode, const char *arg, const char *what, int64_t *out,
                     int *ndim) {
  Py_ssize_t n = PyTuple_Check(tuple) ? PyTuple_Size(tuple) : -1;
  if (n < 0) {
    PyErr_Format(PyExc_TypeError, "%s: its %s is not a tuple", arg, what);
    return -1;
  }
  if (n > JP_MAX_RANK) {
    PyErr_Format(PyExc_ValueError, "%s has rank %zd; jitops takes at most %d dimensions", arg, n,
                 JP_MAX_RANK);
    return -1;
  }
  *ndim = (int)n;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject *item = PyTuple_GetItem(tuple, i);
    if (!PyLong_Check(item)) {
      if (mode == JP_VALIDATE)
        return JP_SYMBOLIC; /* a SymInt: reading it as an int would specialize the graph */
      PyErr_Format(PyExc_TypeError, "%s: %s[%zd] is not an int", arg, what, i);
      return -1;
    }
    out[i] = PyLong_AsLongLong(item);
    if (out[i] == -1 && PyErr_Occurred())
      return -1;
  }
  return JP_OK;
}

static int read_dtype(PyObject *obj, const char *arg, DLDataType *out) {
  PyObject *dtype = PyObject_GetAttr(obj, jp_name_dtype);
  if (dtype == NULL)
    return -1;
  PyObject *entry = jp_dtype_table ? PyDict_GetItem(jp_dtype_table, dtype) : NULL;
  if (entry == NULL) {
    PyObject *repr = PyObject_Str(dtype);
    const char *name = NULL;
    Py_ssize_t size;
    if (repr != NULL)
      name = PyUnicode_AsUTF8AndSize(repr, &size);
    /* The library names the dtypes it takes; here only the DLPack mapping is missing. */
    PyErr_Format(PyExc_TypeError, "%s has dtype %s, which has no DLPack equivalent in jitops", arg,
                 name ? name : "?");
    Py_XDECREF(repr);
    Py_DECREF(dtype);
    return -1;
  }
  Py_DECREF(dtype);
  long code = PyLong_AsLong(PyTuple_GetItem(entry, 0));
  long bits = PyLong_AsLong(PyTuple_GetItem(entry, 1));
  out->code = (uint8_t)code;
  out->bits = (uint8_t)bits;
  out->lanes = 1;
  return PyErr_Occurred() ? -1 : 0;
}

static int read_address_and_device(PyObject *obj, DLTensor *dl) {
  PyObject *ptr = PyObject_CallMethodObjArgs(obj, jp_name_data_ptr, NULL);
  if (ptr == NULL)
    return -1;
  dl->data = PyLong_AsVoidPtr(ptr);
  Py_DECREF(ptr);
  if (PyErr_Occurred()) /* not an int, or out of a pointer's range */
    return -1;
  PyObject *device = PyObject_CallMethodObjArgs(obj, jp_name_get_device, NULL);
  if (device == NULL)
    return -1;
  long index = PyLong_AsLong(device);
  Py_DECREF(device);
  if (PyErr_Occurred())
    return -1;
  dl->device.device_type = index < 0 ? kDLCPU : kDLCUDA;
  dl->device.device_id = index < 0 ? 0 : (int32_t)index;
  return 0;
}

int jp_tensor_read(PyObject *obj, jp_mode mode, const char *arg, jp_tensor *out) {
  DLTensor *dl = &out->dl;
  memset(dl, 0, sizeof *dl);
  dl->shape = out->shape;
  dl->strides = out->strides;
  if (read_dtype(obj, arg, &dl->dtype) < 0)
    return -1;
  PyObject *shape = PyObject_GetAttr(obj, jp_name_shape);
  if (shape == NULL)
    return -1;
  int ndim = 0, stride_ndim = 0;
  int status = read_dims(shape, mode, arg, "shape", out->shape, &ndim);
  Py_DECREF(shape);
  if (status != JP_OK)
    return status;
  PyObject *strides = PyObject_CallMethodObjArgs(obj, jp_name_stride, NULL);
  if (strides == NULL)
    return -1;
  status = read_dims(strides, mode, arg, "stride", out->strides, &stride_ndim);
  Py_DECREF(strides);
  if (status != JP_OK)
    return status;
  if (stride_ndim != ndim) { /* the library would read strides nobody wrote */
    PyErr_Format(PyExc_ValueError, "%s: its stride() has %d entries for %d dimensions", arg,
                 stride_ndim, ndim);
    return -1;
  }
  dl->ndim = ndim;
  if (mode == JP_VALIDATE) {
    dl->data = JP_FAKE_ADDRESS;
    dl->device.device_type = kDLCUDA;
    dl->device.device_id = 0;
    return JP_OK;
  }
  return read_address_and_device(obj, dl) < 0 ? -1 : JP_OK;
}

int jp_tensor_read_optional(PyObject *obj, jp_mode mode, const char *arg, jp_tensor *out,
                            DLTensor **ptr) {
  *ptr = NULL;
  if (obj == Py_None)
    return JP_OK;
  int status = jp_tensor_read(obj, mode, arg, out);
  if (status == JP_OK)
    *ptr = &out->dl;
  return status;
}

int jp_tensor_device(const jp_tensor *t) {
  return t->dl.device.device_type == kDLCUDA ? t->dl.device.device_id : 0;
}
