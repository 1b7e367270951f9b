/* jitops._C: the CPython extension under the `jitops` package. It is a thin layer over the
 * public C API (jitops/jitops.h): argument conversion, one exception class per status, and
 * the GIL released around every call that may compile or launch. Policy (which runtime, which
 * stream, output allocation, autograd) lives in the Python code above it.
 *
 * Built against the stable ABI of Python 3.10 (Py_LIMITED_API), so one wheel serves every
 * CPython from 3.10 on. Functions use METH_FASTCALL: positional arguments only, no keyword
 * parsing, because the torch ops call them on every launch.
 *
 * Tensors. An op function takes tensor objects that speak torch's tensor protocol (data_ptr(),
 * shape, stride(), dtype, get_device()); jp_tensor_read turns one into a DLTensor without any
 * allocation. In JP_VALIDATE mode the data pointer is not read (FakeTensors and meta tensors
 * have none): a fixed, well-aligned address stands in, every tensor is described as CUDA device
 * 0 memory, and the op's *_workspace_size entry point validates shapes, dtypes and layouts on
 * a compile-only runtime. A symbolic size (torch.compile's dynamic shapes) cannot be described;
 * validation is then skipped and the real call checks everything. */
#ifndef JITOPS_PYTHON_BINDING_H
#define JITOPS_PYTHON_BINDING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <jitops/jitops.h>

#define JP_MAX_RANK 16

typedef enum jp_mode {
  JP_RUN = 0,      /* real tensors: validate, allocate the workspace, launch */
  JP_VALIDATE = 1, /* fake tensors: validate only, on a compile-only runtime */
  JP_SIZE = 2      /* real tensors: validate, and return the workspace bytes (benchmarks) */
} jp_mode;

/* A DLTensor with its own shape and stride storage. */
typedef struct jp_tensor {
  DLTensor dl;
  int64_t shape[JP_MAX_RANK];
  int64_t strides[JP_MAX_RANK];
} jp_tensor;

/* jp_tensor_read's results besides -1 (a Python exception is set). */
enum { JP_OK = 0, JP_SYMBOLIC = 1 };

/* Describes `obj` (a tensor) as a DLTensor. `arg` names it in error messages. Returns JP_OK,
 * JP_SYMBOLIC (JP_VALIDATE only: a size or stride is not a plain int), or -1. */
int jp_tensor_read(PyObject *obj, jp_mode mode, const char *arg, jp_tensor *out);

/* The same for an optional tensor: None gives *ptr = NULL, a tensor *ptr = &out->dl. */
int jp_tensor_read_optional(PyObject *obj, jp_mode mode, const char *arg, jp_tensor *out,
                            DLTensor **ptr);

/* Raises the exception class registered for `status`, with jitops_last_error() as the message.
 * Returns NULL, so a caller can `return jp_raise(status);`. */
PyObject *jp_raise(jitops_status status);

/* Device scratch from the registered allocator (torch's caching allocator, on the current
 * stream). `holder` receives the object that owns the memory (NULL when bytes is 0); drop it
 * after the op has been enqueued: the allocator orders its reuse after the op on that stream.
 * Returns 0, or -1 with an exception set. */
int jp_workspace(size_t bytes, int device, PyObject **holder, jitops_workspace *out);

/* The device ordinal of a described tensor, for the workspace (0 for host tensors). */
int jp_tensor_device(const jp_tensor *t);

/* Positional argument helpers. Each returns 0, or -1 with a TypeError naming the argument. */
int jp_arg_count(const char *fn, Py_ssize_t nargs, Py_ssize_t expected);
int jp_arg_pointer(PyObject *obj, const char *arg, void **out);
int jp_arg_int64(PyObject *obj, const char *arg, int64_t *out);
int jp_arg_int(PyObject *obj, const char *arg, int *out);
int jp_arg_double(PyObject *obj, const char *arg, double *out);
/* NULL for None, else the UTF-8 text (valid while obj lives). */
int jp_arg_string(PyObject *obj, const char *arg, const char **out);
/* A sequence of at most `max` ints. */
int jp_arg_int64_list(PyObject *obj, const char *arg, int64_t *out, int max, int *count);

/* The result of an op function: None after a launch, True after validation, False when
 * validation was skipped (symbolic sizes); JP_SIZE gets its number from jp_finish. */
PyObject *jp_done(jp_mode mode, int validated);

/* Reads a tensor argument inside an op function, returning from it when the read fails (an
 * exception) or meets a symbolic size (validation skipped). */
#define JP_READ(obj, mode, arg, tensor)                                                            \
  do {                                                                                             \
    int jp_read_status_ = jp_tensor_read(obj, mode, arg, tensor);                                  \
    if (jp_read_status_ != JP_OK)                                                                  \
      return jp_read_status_ < 0 ? NULL : jp_done(mode, 0);                                        \
  } while (0)

#define JP_READ_OPTIONAL(obj, mode, arg, tensor, ptr)                                              \
  do {                                                                                             \
    int jp_read_status_ = jp_tensor_read_optional(obj, mode, arg, tensor, ptr);                    \
    if (jp_read_status_ != JP_OK)                                                                  \
      return jp_read_status_ < 0 ? NULL : jp_done(mode, 0);                                        \
  } while (0)

/* The common end of an op function. `size_status` and `bytes` come from the op's
 * *_workspace_size call (which validated everything). In JP_VALIDATE mode that is all, and
 * JP_SIZE returns `bytes`; in JP_RUN mode the workspace is allocated on `device` and
 * run(ctx, workspace) enqueues the op without the GIL. */
typedef jitops_status (*jp_op_run)(void *ctx, const jitops_workspace *workspace);
PyObject *jp_finish(jp_mode mode, jitops_status size_status, size_t bytes, int device,
                    jp_op_run run, void *ctx);

/* Reads the leading (mode, runtime) pair of an op function. */
int jp_arg_mode_runtime(PyObject *const *args, jp_mode *mode, jitops_runtime_t **runtime);

/* Method tables of the parts of the module, each ending with a {NULL} entry. */
extern PyMethodDef jp_core_methods[];
extern PyMethodDef jp_cache_methods[];
extern PyMethodDef jp_ctc_methods[];
extern PyMethodDef jp_scan_methods[];
extern PyMethodDef jp_segment_methods[];
extern PyMethodDef jp_repeat_methods[];
extern PyMethodDef jp_flce_methods[];

#define JP_FASTCALL(fn) ((PyCFunction)(void (*)(void))(fn))

#endif
