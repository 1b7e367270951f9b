// The argument readers and result conversion of jitops._direct (direct.h).
#include "direct.h"

#include <ATen/PythonTorchFunctionTLS.h>

namespace jitops_direct {
namespace {

// torch's Python tensor object (THPVariable, torch/csrc/autograd/python_variable.h): the
// object header, then the tensor. _init verifies it at import (layout_matches).
struct TensorObject {
  PyObject header; // PyObject_HEAD
  at::Tensor tensor;
};

} // namespace

State &state() {
  static State instance;
  return instance;
}

const at::Tensor *tensor_of(PyObject *object) {
  return &reinterpret_cast<TensorObject *>(object)->tensor;
}

bool read(PyObject *value, const at::Tensor *&out) {
  PyTypeObject *type = Py_TYPE(value);
  if (type != state().tensor_type && type != state().parameter_type)
    return false;
  out = tensor_of(value);
  return true;
}

bool read(PyObject *value, std::optional<at::Tensor> &out) {
  if (value == Py_None) {
    out.reset();
    return true;
  }
  const at::Tensor *tensor;
  if (!read(value, tensor))
    return false;
  out = *tensor;
  return true;
}

bool read(PyObject *value, int64_t &out) {
  if (!PyLong_CheckExact(value))
    return false;
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (overflow != 0 || (v == -1 && PyErr_Occurred() != nullptr)) {
    PyErr_Clear();
    return false;
  }
  out = v;
  return true;
}

bool read(PyObject *value, c10::SymInt &out) {
  int64_t v;
  if (!read(value, v))
    return false;
  out = c10::SymInt(v);
  return true;
}

bool read(PyObject *value, double &out) {
  if (PyFloat_CheckExact(value)) {
    out = PyFloat_AsDouble(value);
    return true;
  }
  if (!PyLong_CheckExact(value))
    return false;
  out = PyLong_AsDouble(value); // what float(value) gives, as torch.ops converts an int
  if (out == -1.0 && PyErr_Occurred() != nullptr) {
    PyErr_Clear();
    return false;
  }
  return true;
}

bool read(PyObject *value, std::optional<double> &out) {
  if (value == Py_None) {
    out.reset();
    return true;
  }
  double v;
  if (!read(value, v))
    return false;
  out = v;
  return true;
}

bool read(PyObject *value, bool &out) {
  if (value != Py_True && value != Py_False)
    return false;
  out = value == Py_True;
  return true;
}

bool read(PyObject *value, c10::string_view &out) {
  if (!PyUnicode_CheckExact(value))
    return false;
  Py_ssize_t size = 0;
  const char *text = PyUnicode_AsUTF8AndSize(value, &size);
  if (text == nullptr) { // a lone surrogate: torch.ops reports it
    PyErr_Clear();
    return false;
  }
  out = c10::string_view(text, static_cast<size_t>(size));
  return true;
}

namespace {

// The items of a list or tuple (borrowed), or false.
bool items_of(PyObject *value, std::vector<PyObject *> &items) {
  bool list = PyList_CheckExact(value), tuple = PyTuple_CheckExact(value);
  if (!list && !tuple)
    return false;
  Py_ssize_t n = list ? PyList_Size(value) : PyTuple_Size(value);
  items.resize(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i)
    items[i] = list ? PyList_GetItem(value, i) : PyTuple_GetItem(value, i);
  return true;
}

} // namespace

bool read(PyObject *value, std::vector<c10::SymInt> &out) {
  std::vector<PyObject *> items;
  if (!items_of(value, items))
    return false;
  out.resize(items.size());
  for (size_t i = 0; i < items.size(); ++i)
    if (!read(items[i], out[i]))
      return false;
  return true;
}

bool read(PyObject *value, std::array<bool, 3> &out) {
  std::vector<PyObject *> items;
  if (!items_of(value, items) || items.size() != out.size())
    return false;
  for (size_t i = 0; i < items.size(); ++i)
    if (!read(items[i], out[i]))
      return false;
  return true;
}

bool read(PyObject *value, std::optional<std::array<bool, 3>> &out) {
  if (value == Py_None) {
    out.reset();
    return true;
  }
  return read(value, out.emplace());
}

bool no_torch_function() {
  if (!at::impl::torch_function_mode_enabled())
    return true;
  PyTypeObject *device_context = state().device_context_type;
  if (device_context == nullptr)
    return false;
  using Modes = at::impl::PythonTorchFunctionTLS;
  for (int64_t i = 0; i < Modes::stack_len(); ++i) {
    const std::shared_ptr<c10::SafePyObject> &mode = Modes::get_stack_at(i);
    if (Py_TYPE(mode->ptr(&mode->pyinterpreter())) != device_context)
      return false;
  }
  return true;
}

PyObject *to_python(const at::Tensor &tensor) {
  return THPVariable_Wrap(tensor);
}

PyObject *to_python(const std::vector<at::Tensor> &tensors) {
  PyObject *list = PyList_New(static_cast<Py_ssize_t>(tensors.size()));
  if (list == nullptr)
    return nullptr;
  for (size_t i = 0; i < tensors.size(); ++i) {
    PyObject *item = THPVariable_Wrap(tensors[i]);
    if (item == nullptr || PyList_SetItem(list, static_cast<Py_ssize_t>(i), item) != 0) {
      Py_DECREF(list);
      return nullptr;
    }
  }
  return list;
}

bool set_item(PyObject *tuple, Py_ssize_t i, PyObject *item) {
  return item != nullptr && PyTuple_SetItem(tuple, i, item) == 0;
}

PyObject *decline() {
  ++state().declined;
  Py_INCREF(Py_NotImplemented);
  return Py_NotImplemented;
}

} // namespace jitops_direct
