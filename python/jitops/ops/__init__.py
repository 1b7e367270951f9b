"""The built-in ops as PyTorch custom ops (``torch.ops.jitops.*``): each runs on its
tensors' device and torch's current stream, takes its workspace from torch's caching
allocator, has a fake kernel (FakeTensor, meta tensors, torch.compile) and an autograd
formula backed by the library's own backward kernels, and is deterministic.

Arguments are checked by the library before any GPU work; a bad one raises a
:class:`jitops.Error` subclass (also a ValueError or TypeError) whose message names it. The
same checks run on fake and meta tensors, so torch.compile reports them while tracing.
"""

from .ctc import ctc_loss
from .flce import fused_linear_cross_entropy, fused_linear_cross_entropy_with_lse
from .repeat import repeat
from .scan import cummax, cummin, cumprod, cumsum, logcumsumexp
from .segment import segment_max, segment_mean, segment_min, segment_reduce, segment_sum

__all__ = [
    "ctc_loss",
    "cumsum",
    "cumprod",
    "cummax",
    "cummin",
    "logcumsumexp",
    "segment_reduce",
    "segment_sum",
    "segment_mean",
    "segment_max",
    "segment_min",
    "repeat",
    "fused_linear_cross_entropy",
    "fused_linear_cross_entropy_with_lse",
]
