// jitops._direct: the ops' direct entries from Python (METH_FASTCALL), which read their
// arguments from the Python objects and call the op's typed operator handle, skipping what
// torch.ops adds in Python and pybind11 before the dispatcher: the OpOverload call, the schema
// matching that boxes every argument into an IValue, the boxed-to-unboxed kernel call and the
// boxing of the results. The C++ dispatcher still runs every call (dispatch keys, autograd,
// modes, functorch, profiler), so a call here is the call torch.ops would make.
//
// What torch.ops does before the dispatcher, and what an entry does instead:
// - __torch_function__: torch.ops hands the call to a tensor subclass's override or to an
//   active TorchFunctionMode. An entry takes only tensors whose type is exactly torch.Tensor or
//   torch.nn.Parameter (for which torch.ops finds no override) and no active TorchFunctionMode
//   but torch's DeviceContext (torch.set_default_device, `with torch.device(...)`), whose
//   __torch_function__ fills in the device of factory functions and hands every other call,
//   these ops', straight on: what torch.ops would do.
// - argument matching: torch.ops converts anything its schema accepts (ints as floats, SymInts,
//   NumPy scalars, ...) and raises for the rest. An entry takes only the plain Python values it
//   reads exactly as torch.ops would (int, float, bool, str, None, lists of them).
// Anything else is declined: the entry returns NotImplemented, and the Python caller makes the
// same call through torch.ops. Under torch.compile the Python caller never calls an entry.
//
// This module is built against the stable ABI of CPython 3.10 (one file for every CPython),
// which PyTorch's Python headers cannot be compiled against: the two libtorch_python functions
// it needs are declared here, and its view of torch's Python tensor object is checked against
// torch at import (_init).
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>
#include <c10/util/string_view.h>

#include <array>
#include <exception>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// libtorch_python (torch/csrc/autograd/python_variable.h, torch/csrc/Exceptions.h).
PyObject *THPVariable_Wrap(const at::TensorBase &var);
namespace torch {
void translate_exception_to_python(const std::exception_ptr &error);
} // namespace torch

namespace jitops_direct {

// ---- what a call is given --------------------------------------------------------------------

// Set by _init: the exact types of a plain tensor, whether the layout check passed, and
// whether the entries take calls (enable() may turn them off).
struct State {
  PyTypeObject *tensor_type = nullptr;
  PyTypeObject *parameter_type = nullptr;
  PyTypeObject *device_context_type = nullptr; // torch.utils._device.DeviceContext, if found
  bool layout_ok = false;
  bool enabled = false;
  unsigned long long direct = 0, declined = 0; // calls, counted under the GIL
};
State &state();

// The tensor inside torch's Python tensor object (the layout that _init verified).
const at::Tensor *tensor_of(PyObject *object);

// Each reader returns false, with no Python error set, for a value the entry declines.
bool read(PyObject *value, const at::Tensor *&out);
bool read(PyObject *value, std::optional<at::Tensor> &out); // None or a tensor
bool read(PyObject *value, int64_t &out);
bool read(PyObject *value, c10::SymInt &out);
bool read(PyObject *value, double &out); // a float or an int, as torch.ops converts it
bool read(PyObject *value, std::optional<double> &out);
bool read(PyObject *value, bool &out);
bool read(PyObject *value, c10::string_view &out);                   // valid while `value` lives
bool read(PyObject *value, std::vector<c10::SymInt> &out);           // a list or tuple of ints
bool read(PyObject *value, std::array<bool, 3> &out);                // a list or tuple of 3 bools
bool read(PyObject *value, std::optional<std::array<bool, 3>> &out); // None or 3 bools

// Whether no TorchFunctionMode that torch.ops would hand the call to is active: none, or only
// DeviceContexts.
bool no_torch_function();

// ---- what a call returns ---------------------------------------------------------------------

PyObject *to_python(const at::Tensor &tensor);
PyObject *to_python(const std::vector<at::Tensor> &tensors); // a list, as torch.ops returns it

// Puts `item` (a new reference, or null for a failed conversion) into `tuple` at `i`.
bool set_item(PyObject *tuple, Py_ssize_t i, PyObject *item);

template <class... T> PyObject *to_python(const std::tuple<T...> &values) {
  PyObject *tuple = PyTuple_New(sizeof...(T));
  if (tuple == nullptr)
    return nullptr;
  bool ok = true;
  Py_ssize_t i = 0;
  std::apply(
      [&](const auto &...value) { ((ok = ok && set_item(tuple, i++, to_python(value))), ...); },
      values);
  if (!ok) {
    Py_DECREF(tuple);
    return nullptr;
  }
  return tuple;
}

// NotImplemented: the Python caller goes through torch.ops.
PyObject *decline();

// Runs `run()` (the typed operator call) without the GIL, as torch.ops does, and returns its
// result as Python objects; a C++ exception becomes the Python exception torch.ops would raise.
template <class Run> PyObject *call(Run &&run) {
  using Result = decltype(run());
  ++state().direct;
  std::optional<Result> result;
  std::exception_ptr error;
  PyThreadState *thread = PyEval_SaveThread();
  try {
    result.emplace(run());
  } catch (...) {
    error = std::current_exception();
  }
  PyEval_RestoreThread(thread);
  if (error) {
    torch::translate_exception_to_python(error);
    return nullptr;
  }
  try {
    return to_python(*result);
  } catch (...) {
    torch::translate_exception_to_python(std::current_exception());
    return nullptr;
  }
}

// Reads args[0..n) into `values` (one reader each): false when any is declined or the count is
// not the entry's.
template <class... T> bool read_all(PyObject *const *args, Py_ssize_t n, std::tuple<T...> &values) {
  if (n != static_cast<Py_ssize_t>(sizeof...(T)) || !state().enabled || !no_torch_function())
    return false;
  return std::apply(
      [&](auto &...value) {
        Py_ssize_t i = 0;
        return (read(args[i++], value) && ...);
      },
      values);
}

} // namespace jitops_direct
