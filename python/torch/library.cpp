// The jitops operator namespace. The op files add their definitions as fragments; the fake
// kernels (shapes and dtypes for FakeTensor, meta tensors and torch.compile) live in Python,
// in the module named here, which torch imports when it needs them.
#include <torch/library.h>

TORCH_LIBRARY(jitops, m) {
  m.set_python_module("jitops.ops");
}
