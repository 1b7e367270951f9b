// jitops._direct (direct.h): one METH_FASTCALL entry per op that jitops.ops calls, with the
// positional arguments of the op's schema; each returns the op's result (FLCE's without the
// gradients its autograd graph keeps, see Flce), or NotImplemented when it declines the call (the
// caller then goes through torch.ops).
#include "direct.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>

namespace jitops_direct {
namespace {

using Tensor = const at::Tensor *; // how an entry holds a tensor argument (borrowed)
using Optional = std::optional<at::Tensor>;
using Pair = std::tuple<at::Tensor, at::Tensor>;

// What an entry passes to the operator for what it read.
const at::Tensor &pass(Tensor value) {
  return *value;
}
c10::SymIntArrayRef pass(const std::vector<c10::SymInt> &value) {
  return value;
}
template <class T> const T &pass(const T &value) {
  return value;
}

// The entry of operator `Name` (its typed handle: the signature of its C++ kernels), whose
// arguments are read as `Stored`.
template <const char *Name, class Signature, class... Stored> struct Entry {
  static const char *name() {
    return Name + sizeof "jitops::" - 1;
  }
  static const c10::TypedOperatorHandle<Signature> &op() {
    static const auto handle =
        c10::Dispatcher::singleton().findSchemaOrThrow(Name, "").template typed<Signature>();
    return handle;
  }
  using Values = std::tuple<Stored...>;
  // The operator's result for what the entry read.
  static auto run(const Values &values) {
    return std::apply([](const auto &...value) { return op().call(pass(value)...); }, values);
  }
  static PyObject *function(PyObject *, PyObject *const *args, Py_ssize_t n) {
    Values values;
    if (!read_all(args, n, values))
      return decline();
    return call([&] { return run(values); });
  }
};

constexpr char kCumsum[] = "jitops::cumsum", kCumprod[] = "jitops::cumprod",
               kLogcumsumexp[] = "jitops::logcumsumexp", kCummax[] = "jitops::cummax",
               kCummin[] = "jitops::cummin", kSegment[] = "jitops::segment_reduce",
               kSegmentCounted[] = "jitops::segment_reduce_counted", kRepeat[] = "jitops::repeat",
               kCtc[] = "jitops::ctc_loss", kFlce[] = "jitops::fused_linear_cross_entropy";

using ScanSignature = at::Tensor(const at::Tensor &, int64_t, bool);
using IndexedSignature = Pair(const at::Tensor &, int64_t, bool);
template <class Result>
using SegmentSignature = Result(const at::Tensor &, const at::Tensor &, c10::SymInt,
                                c10::string_view, bool, std::optional<double>);
using RepeatSignature = at::Tensor(const at::Tensor &, c10::SymIntArrayRef);
using CtcSignature = at::Tensor(const at::Tensor &, const at::Tensor &, const at::Tensor &,
                                const at::Tensor &, int64_t, c10::string_view, bool, int64_t);
using FlceSignature = std::vector<at::Tensor>(const at::Tensor &, const at::Tensor &,
                                              const at::Tensor &, const Optional &, int64_t, double,
                                              double, double, c10::string_view, std::array<bool, 3>,
                                              bool, bool);

template <const char *Name> using Scan = Entry<Name, ScanSignature, Tensor, int64_t, bool>;
template <const char *Name> using Indexed = Entry<Name, IndexedSignature, Tensor, int64_t, bool>;
template <const char *Name, class Result>
using Segment = Entry<Name, SegmentSignature<Result>, Tensor, Tensor, c10::SymInt, c10::string_view,
                      bool, std::optional<double>>;
using Repeat = Entry<kRepeat, RepeatSignature, Tensor, std::vector<c10::SymInt>>;
using Ctc = Entry<kCtc, CtcSignature, Tensor, Tensor, Tensor, Tensor, int64_t, c10::string_view,
                  bool, int64_t>;

// FLCE's entry returns the loss, or (loss, lse) when asked for (its last argument), but not the
// gradients the forward also makes: the autograd graph holds those, and jitops.ops reads only
// the loss and lse, so they are not made Python objects to be freed again at once. Its `grads`
// may be None: the gradients autograd will want are then read here, by the rule jitops.ops
// applies (grad mode on, and each of input, weight, bias requiring grad), which saves the
// Python caller reading them. Since it drops the gradients, it lets a small call's share one
// allocation (the op's shared_gradients).
struct Flce : Entry<kFlce, FlceSignature, Tensor, Tensor, Tensor, Optional, int64_t, double, double,
                    double, c10::string_view, std::optional<std::array<bool, 3>>, bool> {
  static std::array<bool, 3> wanted(const Values &values) {
    if (!at::GradMode::is_enabled())
      return {false, false, false};
    const Optional &bias = std::get<3>(values);
    return {std::get<0>(values)->requires_grad(), std::get<1>(values)->requires_grad(),
            bias.has_value() && bias->requires_grad()};
  }
  static std::vector<at::Tensor> run(const Values &values) {
    const auto &[input, weight, target, bias, ignore_index, smoothing, softcap, z_loss, reduction,
                 grads, lse] = values;
    return op().call(*input, *weight, *target, bias, ignore_index, smoothing, softcap, z_loss,
                     reduction, grads ? *grads : wanted(values), lse, /*shared_gradients=*/true);
  }
  static PyObject *function(PyObject *, PyObject *const *args, Py_ssize_t n) {
    Values values;
    if (!read_all(args, n, values))
      return decline();
    if (std::get<std::tuple_size_v<Values> - 1>(values))
      return call([&] {
        std::vector<at::Tensor> out = run(values);
        return Pair(std::move(out[0]), std::move(out[1]));
      });
    return call([&] { return std::move(run(values)[0]); });
  }
};

template <class... E> struct Entries {
  // Looks every operator up: an op missing from the torch layer, or a signature that is not
  // its kernels', fails the import rather than a call.
  static void resolve() {
    (E::op(), ...);
  }
  static constexpr size_t count = sizeof...(E);
  template <class Method> static void methods(Method *out) {
    size_t i = 0;
    ((out[i++] = Method{E::name(),
                        reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&E::function)),
                        METH_FASTCALL, nullptr}),
     ...);
  }
};

using All =
    Entries<Scan<kCumsum>, Scan<kCumprod>, Scan<kLogcumsumexp>, Indexed<kCummax>, Indexed<kCummin>,
            Segment<kSegment, at::Tensor>, Segment<kSegmentCounted, Pair>, Repeat, Ctc, Flce>;

// Whether `sample` (a torch.Tensor) holds the tensor whose TensorImpl address is `cdata`
// (Tensor._cdata), and wraps back to itself: the layout TensorObject assumes is torch's.
bool layout_matches(PyObject *sample, PyObject *cdata) {
  void *impl = PyLong_AsVoidPtr(cdata);
  if (impl == nullptr || tensor_of(sample)->unsafeGetTensorImpl() != impl) {
    PyErr_Clear();
    return false;
  }
  PyObject *wrapped = THPVariable_Wrap(*tensor_of(sample));
  if (wrapped == nullptr) { // its error would otherwise surface as a SystemError at import
    PyErr_Clear();
    return false;
  }
  Py_DECREF(wrapped);
  return wrapped == sample;
}

// _init(tensor_type, parameter_type, sample, sample_cdata, device_context_type=None) -> bool:
// the exact tensor types, and the one TorchFunctionMode the entries see through (None: none);
// enables the entries when the layout check passes. Called by jitops.ops once the torch layer
// is loaded.
PyObject *init(PyObject *, PyObject *args) {
  PyObject *tensor_type, *parameter_type, *sample, *cdata, *device_context = Py_None;
  if (!PyArg_ParseTuple(args, "O!O!OO|O", &PyType_Type, &tensor_type, &PyType_Type, &parameter_type,
                        &sample, &cdata, &device_context))
    return nullptr;
  if (device_context != Py_None && !PyType_Check(device_context)) {
    PyErr_SetString(PyExc_TypeError, "_init: device_context_type must be a type or None");
    return nullptr;
  }
  if (Py_TYPE(sample) != reinterpret_cast<PyTypeObject *>(tensor_type)) {
    PyErr_SetString(PyExc_TypeError, "_init: sample must be a torch.Tensor");
    return nullptr;
  }
  try {
    All::resolve();
  } catch (...) {
    torch::translate_exception_to_python(std::current_exception());
    return nullptr;
  }
  State &s = state();
  Py_INCREF(tensor_type);
  Py_INCREF(parameter_type);
  Py_XDECREF(reinterpret_cast<PyObject *>(s.tensor_type));
  Py_XDECREF(reinterpret_cast<PyObject *>(s.parameter_type));
  s.tensor_type = reinterpret_cast<PyTypeObject *>(tensor_type);
  s.parameter_type = reinterpret_cast<PyTypeObject *>(parameter_type);
  Py_XDECREF(reinterpret_cast<PyObject *>(s.device_context_type));
  s.device_context_type = nullptr;
  if (device_context != Py_None) {
    Py_INCREF(device_context);
    s.device_context_type = reinterpret_cast<PyTypeObject *>(device_context);
  }
  s.layout_ok = s.enabled = layout_matches(sample, cdata);
  return PyBool_FromLong(s.enabled);
}

// enable(flag) -> bool: turns the entries off (every call declined, so jitops.ops goes through
// torch.ops) or back on, when the layout check passed; returns whether they were on. For tests
// and benchmarks, which compare the two paths.
PyObject *enable(PyObject *, PyObject *flag) {
  int on = PyObject_IsTrue(flag);
  if (on < 0)
    return nullptr;
  State &s = state();
  bool was = s.enabled;
  s.enabled = on != 0 && s.layout_ok;
  return PyBool_FromLong(was);
}

// counts() -> (direct, declined): the calls the entries made, and those they declined.
PyObject *counts(PyObject *, PyObject *) {
  return Py_BuildValue("(KK)", state().direct, state().declined);
}

PyMethodDef methods[All::count + 4] = {};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT,
                          "jitops._direct",
                          "Direct entries of the jitops ops (see python/torch/direct/direct.h).",
                          -1,
                          methods,
                          nullptr,
                          nullptr,
                          nullptr,
                          nullptr};

} // namespace
} // namespace jitops_direct

extern "C" __attribute__((visibility("default"))) PyObject *PyInit__direct() {
  using namespace jitops_direct;
  All::methods(methods);
  methods[All::count] = {"_init", init, METH_VARARGS, nullptr};
  methods[All::count + 1] = {"counts", counts, METH_NOARGS, nullptr};
  methods[All::count + 2] = {"enable", enable, METH_O, nullptr};
  return PyModule_Create(&module_def);
}
