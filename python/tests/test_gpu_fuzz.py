"""Seeded, randomized differential tests of every built-in op against PyTorch ("fuzz").

The fixed, parametrized tests in the other ``test_gpu_*.py`` files check a few chosen shapes;
the ops pick among many internal algorithms by shape (scans: row, column, look-back,
short-row and one-tile paths; segment reductions: tiles, digit, narrow, atomic, buckets, sort
and sorted-boundary paths, chosen by N, D, S, sortedness and dtype). Here each test draws one
random configuration per seed (``random.Random`` makes the choices, a seeded CPU
``torch.Generator`` the data, so that a seed gives the same case on any machine), compares
the op, forward and backward, with PyTorch in f64, then runs it again and requires
bit-identical outputs and gradients (every op is documented as deterministic).

Families: scans (cumsum, cumprod, cummax, cummin, logcumsumexp), segment reductions (sum,
mean, max, min), repeat, ctc_loss and fused_linear_cross_entropy. Each is one test function
parametrized over the seeds ``JITOPS_FUZZ_SEED`` (default 0) to ``JITOPS_FUZZ_SEED + n - 1``,
where n is ``JITOPS_FUZZ_CASES`` when set, else the family's entry in ``DEFAULT_CASES``.

A failure names the seed and the whole configuration. To run one seed again::

    JITOPS_FUZZ_SEED=17 JITOPS_FUZZ_CASES=1 python -m pytest python/tests/test_gpu_fuzz.py \
        -k test_scans

(or, for a seed of the default range, the node id ``test_gpu_fuzz.py::test_scans[seed17]``).
To explore other seeds: ``JITOPS_FUZZ_SEED=1000 JITOPS_FUZZ_CASES=200``.

Tolerances bound rounding errors; they are not fudge factors. Each comparison is elementwise,
``|got - want| <= tol * bound``, where ``bound`` is the magnitude the error scales with (the
same computation on absolute values: the cumulative sum of |x| for cumsum, the gradient for
|dy|, ...), and ``tol`` the dtype's (``gpu.TOLERANCE``), grown with the length of the
accumulation. Results that are copies or selections (cummax/cummin values and indices,
segment max/min, repeat's forward, integer scans) must be exact.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
from typing import Any, Callable, ContextManager, Iterator, Optional, Sequence, Union

import pytest
from gpu import DEVICE, TOLERANCE, scan_reference, segment_reference, torch

import jitops.ops as O
from jitops.ops import _torch as jitops_torch

pytestmark = pytest.mark.gpu
F = torch.nn.functional
Tensor = torch.Tensor
View = Callable[[Tensor], Tensor]
Path = Callable[[], ContextManager[Any]]

# Cases per family when JITOPS_FUZZ_CASES is not set, keyed by family (its test is
# test_<family>). The 192 of the defaults take about 100 s on an H200 with an empty kernel cache,
# most of it the first compile of each kernel the cases reach.
DEFAULT_CASES = {"scans": 48, "segment_reductions": 64, "repeat": 24, "ctc_loss": 32,
                 "fused_linear_cross_entropy": 24}

HALF = (torch.float16, torch.bfloat16)
F32, F64 = torch.float32, torch.float64
# Unit roundoff of each float dtype.
UNIT = {F64: 2.0**-53, F32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}
MAX_ELEMENTS = 2**22  # elements of the main tensor of a case, about


def _seeds(family: str) -> list[int]:
    count = int(os.environ.get("JITOPS_FUZZ_CASES") or DEFAULT_CASES[family])
    first = int(os.environ.get("JITOPS_FUZZ_SEED") or 0)
    return list(range(first, first + count))


def _seed_id(seed: int) -> str:
    return f"seed{seed}"


# ---- a case: its seed, its random sources and its configuration --------------------------------


def _text(value: Any) -> str:
    if isinstance(value, torch.dtype):
        return str(value).replace("torch.", "")
    if isinstance(value, float):
        return f"{value:.6g}"
    return repr(value)


class Case:
    """One random configuration: ``rng`` makes the choices and ``generator`` (on the CPU, so
    that a seed gives the same data on every GPU) the data; each choice is recorded in
    ``config``, which a failure prints."""

    def __init__(self, family: str, seed: int) -> None:
        self.family, self.seed = family, seed
        self.rng = random.Random(f"jitops-fuzz:{family}:{seed}")
        self.generator = torch.Generator().manual_seed(self.rng.getrandbits(62))
        self.config: dict[str, Any] = {}

    def choose(self, name: str, options: Sequence[Any],
               weights: Optional[Sequence[float]] = None) -> Any:
        """A random element of ``options`` (with ``weights``), recorded as ``name``."""
        return self.set(name, self.rng.choices(list(options), weights=weights)[0])

    def set(self, name: str, value: Any) -> Any:
        """Records ``value`` as ``name`` and returns it."""
        self.config[name] = value
        return value

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def randn(self, shape: Sequence[int], scale: float = 1.0) -> Tensor:
        """Normal f64 data on the GPU, never exactly 0."""
        x = torch.randn(tuple(shape), generator=self.generator, dtype=F64) * scale
        x = torch.where(x == 0, torch.full_like(x, 0.5 * scale), x)
        return x.to(DEVICE)

    def rand(self, shape: Sequence[int]) -> Tensor:
        """Uniform [0, 1) f64 data on the GPU."""
        return torch.rand(tuple(shape), generator=self.generator, dtype=F64).to(DEVICE)

    def randint(self, low: int, high: int, shape: Sequence[int]) -> Tensor:
        """int64 in [low, high) on the GPU."""
        return torch.randint(low, high, tuple(shape), generator=self.generator).to(DEVICE)

    def randperm(self, n: int) -> Tensor:
        return torch.randperm(n, generator=self.generator).to(DEVICE)

    def path(self) -> Path:
        """How the case calls the op, as a factory of context managers (one a use): through
        jitops.ops' direct entries (the default) or through torch.ops (the dispatcher)."""
        if self.choose("path", ["direct", "dispatcher"], [3, 1]) == "dispatcher":
            return jitops_torch.dispatcher_path
        return contextlib.nullcontext

    def __str__(self) -> str:
        settings = ", ".join(f"{key}={_text(value)}" for key, value in self.config.items())
        return (f"[{self.family} seed {self.seed}] {settings}\n"
                f"reproduce: JITOPS_FUZZ_SEED={self.seed} JITOPS_FUZZ_CASES=1 "
                f"python -m pytest python/tests/test_gpu_fuzz.py -k test_{self.family}")


@contextlib.contextmanager
def reported(case: Case) -> Iterator[None]:
    """Runs a case, prefixing any failure (an assertion, or an exception the op should not
    have raised) with the seed and the whole configuration."""
    try:
        yield
    except AssertionError as error:
        raise AssertionError(f"{case}\n{error}") from error
    except Exception as error:
        raise AssertionError(f"{case}\nraised {type(error).__name__}: {error}") from error


def log_uniform(rng: random.Random, low: int, high: int) -> int:
    """An int in [low, high] (low >= 1) whose logarithm is about uniform."""
    if high <= low:
        return low
    value = int(math.exp(rng.uniform(math.log(low), math.log(high + 1))))
    return min(high, max(low, value))


def grow(tol: float, n: int) -> float:
    """A tolerance for a result accumulated over n terms (the error of a sum grows about as
    sqrt(n) with random rounding)."""
    return tol * (1.0 + math.sqrt(max(n, 1)) / 32.0)


def floor(dtype: torch.dtype) -> float:
    """An absolute tolerance for results that round into the subnormal range of a 16-bit
    float (a gradient divided by a large count): one subnormal step."""
    return torch.finfo(dtype).tiny * 2 * UNIT[dtype] if dtype in HALF else 0.0


def product_tolerance(dtype: torch.dtype, n: int) -> float:
    """Relative tolerance for products of up to n factors (cumprod and its gradient): a product
    carries at most (n - 1) roundings of the accumulation type in any order (Higham, Accuracy
    and Stability of Numerical Algorithms, lemma 3.1), and a parallel scan's products come near
    that: the products of its chunks, of factors near 1, round one way more often than the
    other (-0.02 to -0.15 of a unit a factor, measured), so their error grows with n, not with
    sqrt(n) (f32 cumprod over 2^20 factors near 1: 1.1e-3 from an f64 reference, where a
    sequential product stays within 3e-5)."""
    return tolerance(dtype, n) + max(n - 1, 1) * UNIT[F32 if dtype in HALF else dtype]


def tolerance(dtype: torch.dtype, n: int = 1) -> float:
    """Relative tolerance for a result of ``dtype`` accumulated over n terms: 16-bit floats
    accumulate in f32 and round once (their tolerance, plus f32's grown); f32 and f64
    accumulate in themselves."""
    if dtype in HALF:
        return TOLERANCE[dtype] + grow(TOLERANCE[F32], n)
    return grow(TOLERANCE[dtype], n)


# ---- comparisons ------------------------------------------------------------------------------


def _index(shape: Sequence[int], flat: int) -> tuple[int, ...]:
    index = []
    for size in reversed(list(shape)):
        index.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return tuple(reversed(index))


def _at(t: Tensor, flat: int) -> float:
    return t.flatten()[flat].item()


def check_close(got: Tensor, want: Tensor, bound: Union[Tensor, float], tol: float, what: str,
                atol: float = 0.0) -> None:
    """|got - want| <= tol * bound + atol elementwise (``bound`` broadcasts to want's shape);
    NaN and infinities of ``want`` must be matched exactly, and ``got`` has no others but
    where ``want``, within its tolerance, reaches the range of got's dtype (a 16-bit or f32
    result that overflows rounds to an infinity of want's sign)."""
    shape, wanted = tuple(got.shape), tuple(want.shape)
    assert shape == wanted, f"{what}: shape {shape}, expected {wanted}"
    if want.numel() == 0:
        return
    g = got.detach().double()
    w = want.detach().double().to(g.device)
    bound64 = torch.broadcast_to(torch.as_tensor(bound, dtype=F64, device=g.device), w.shape)
    allowed = bound64 * tol + atol
    if got.is_floating_point() and got.dtype != F64:
        overflow = torch.finfo(got.dtype).max * (1 + UNIT[got.dtype])  # rounds to inf from here
        rounded_away = (torch.isfinite(w) & torch.isinf(g) & (torch.sign(g) == torch.sign(w)) &
                        (w.abs() + allowed >= overflow))
        g = torch.where(rounded_away, w, g)
    nan_differs = torch.isnan(g) != torch.isnan(w)
    if nan_differs.any():
        flat = int(torch.nonzero(nan_differs.flatten())[0])
        raise AssertionError(
            f"{what}: NaN mismatch at {_index(w.shape, flat)}: got {_at(g, flat)}, expected "
            f"{_at(w, flat)} ({int(nan_differs.sum())} such of {w.numel()} elements)")
    inf_differs = (torch.isinf(g) | torch.isinf(w)) & (g != w) & ~torch.isnan(w)
    if inf_differs.any():
        flat = int(torch.nonzero(inf_differs.flatten())[0])
        raise AssertionError(
            f"{what}: infinity mismatch at {_index(w.shape, flat)}: got {_at(g, flat)}, expected "
            f"{_at(w, flat)} ({int(inf_differs.sum())} such of {w.numel()} elements)")
    finite = torch.isfinite(w)
    error = torch.where(finite, (g - w).abs(), torch.zeros_like(w))
    bad = error > allowed
    if bad.any():
        excess = torch.where(bad, error - allowed, torch.zeros_like(w))
        flat = int(torch.argmax(excess.flatten()))
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {w.numel()} elements beyond tolerance; worst at "
            f"{_index(w.shape, flat)}: got {_at(g, flat):.9g}, expected {_at(w, flat):.9g}, "
            f"error {_at(error, flat):.3g} > allowed {_at(allowed, flat):.3g} (tol {tol:.3g} x "
            f"bound {_at(bound64, flat):.3g} + {atol:.3g}); largest error anywhere "
            f"{error.max().item():.3g}")


def check_equal(got: Tensor, want: Tensor, what: str) -> None:
    """Exactly equal values (NaN where the other has NaN), shapes and dtypes."""
    shape, wanted = tuple(got.shape), tuple(want.shape)
    assert shape == wanted, f"{what}: shape {shape}, expected {wanted}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
    want = want.to(got.device)
    same = got == want
    if got.is_floating_point():
        same |= torch.isnan(got) & torch.isnan(want)
    if not same.all():
        flat = int(torch.nonzero(~same.flatten())[0])
        raise AssertionError(
            f"{what}: {int((~same).sum())} of {got.numel()} elements differ; first at "
            f"{_index(got.shape, flat)}: got {_at(got, flat)}, expected {_at(want, flat)}")


def _bits(t: Tensor) -> Tensor:
    t = t.detach().contiguous()
    if t.is_floating_point():
        return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def check_rerun(first: Sequence[Optional[Tensor]], second: Sequence[Optional[Tensor]],
                names: Sequence[str]) -> None:
    """The outputs of two identical calls are bit-identical (NaN payloads included)."""
    for a, b, name in zip(first, second, names):
        assert (a is None) == (b is None), f"rerun: {name} present in one run only"
        if a is None or b is None:
            continue
        assert a.shape == b.shape and a.dtype == b.dtype, f"rerun: {name} changed shape or dtype"
        differ = int((_bits(a) != _bits(b)).sum())
        assert differ == 0, f"rerun: {name} not bit-identical ({differ} of {a.numel()} differ)"


def leaf64(t: Tensor) -> Tensor:
    """A new f64 leaf that requires grad, with t's values (``t.double()`` alone would be t
    itself for f64, and requires_grad_ would then change the caller's tensor)."""
    return t.detach().double().requires_grad_()


def grad_to_base(base: Tensor, view: View, grad_of_view: Tensor) -> Tensor:
    """The gradient with respect to ``base`` (in f64) of ``view(base)`` for ``grad_of_view``:
    where a gradient of a view's values lands on the tensor it views (summed over expanded
    dims, zero where the view does not look)."""
    leaf = leaf64(base)
    view(leaf).backward(grad_of_view.double())
    assert leaf.grad is not None
    return leaf.grad


# ---- layouts ------------------------------------------------------------------------------------


def strided_layout(case: Case, shape: Sequence[int],
                   no_expand: Sequence[int] = ()) -> tuple[list[int], View]:
    """A base shape and the view of it that has ``shape``, in a random layout: contiguous,
    transposed (a permutation of the dims), every s-th element along one dim, offset by one
    element along a dim (a start off 4 bytes for 2-byte types), or expanded from size 1 along
    a dim (stride 0; never along ``no_expand``)."""
    rank = len(shape)
    kinds = ["contiguous", "transposed", "step", "offset", "expanded"]
    kind = case.choose("layout", kinds, [4, 2, 2, 1.5, 1])
    base = list(shape)
    if kind == "transposed" and rank >= 2:
        perm = list(range(rank))
        while perm == sorted(perm):
            case.rng.shuffle(perm)
        case.set("perm", perm)
        base = [shape[p] for p in perm]
        inverse = sorted(range(rank), key=lambda i: perm[i])
        return base, lambda t: t.permute(inverse)
    if kind == "expanded":
        dims = [d for d in range(rank) if shape[d] > 1 and d not in no_expand]
        if dims:
            d = case.set("expanded_dim", case.rng.choice(dims))
            base[d] = 1
            return base, lambda t: t.expand(*shape)
    if kind in ("step", "transposed", "expanded"):  # the last two when they cannot apply
        case.set("layout", "step")
        d = case.set("step_dim", case.rng.randrange(rank))
        step = case.set("step", case.rng.choice([2, 3]))
        base[d] = shape[d] * step
        return base, lambda t: t[(slice(None),) * d + (slice(None, None, step),)]
    if kind == "offset":
        d = case.set("offset_dim", case.rng.randrange(rank))
        base[d] += 1
        return base, lambda t: t.narrow(d, 1, shape[d])
    return base, lambda t: t


# ---- scans --------------------------------------------------------------------------------------

SCAN_OPS = ["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"]
SCAN_LENGTHS = [1, 2, 3, 31, 32, 33, 127, 128, 129, 255, 256, 257, 1023, 1024, 1025, 2047, 2048,
                2049, 4095, 4096, 4097, 8191, 8192, 16385, 65536, 65537, 2**20]
ScanResult = Union[Tensor, tuple[Tensor, Tensor]]
CUMPROD_FACTORS = ["near one", "powers of two"]


def _values(result: ScanResult) -> Tensor:
    return result[0] if isinstance(result, tuple) else result


def scan_data(case: Case, op: str, dtype: torch.dtype, shape: Sequence[int], length: int) -> Tensor:
    """Data that keeps each op in range: cumprod's products near 1, logcumsumexp's values
    moderate, integer sums and products far from overflow."""
    if not dtype.is_floating_point:
        if op == "cumsum":  # +-1..3: |sum| <= 3 * 2^20
            x = case.randint(1, 4, shape) * (case.randint(0, 2, shape) * 2 - 1)
        else:  # +-1, and +-2 at no more than 24 places: |product| <= 2^24
            x = (case.randint(0, 2, shape) * 2 - 1).flatten()
            x[case.randperm(x.numel())[:24]] *= 2
            x = x.reshape(tuple(shape))
        return x.to(dtype)
    if op == "cumprod" and case.choose("factors", CUMPROD_FACTORS, [3, 1]) == "powers of two":
        # Exact products: 1/2, 1 and 2, with about 32 (f16: 2) halvings and doublings along the
        # axis, so that the exponents walk far from every range limit.
        p = min(0.25, (2 if dtype == torch.float16 else 32) / length)
        u = case.rand(shape)
        x = torch.where(u < p, 0.5, torch.where(u > 1 - p, 2.0, 1.0)).to(F64)
        if case.choose("signs", ["positive", "mixed"]) == "mixed":
            x = torch.where(case.rand(shape) < 0.5, -x, x)
        return x.to(dtype)
    z = case.randn(shape)
    if op == "cumprod":  # log|prefix product|: a random walk of standard deviation <= 0.5
        x = torch.exp(z * min(0.5, 0.5 / math.sqrt(length)))
        if case.choose("signs", ["positive", "mixed"]) == "mixed":
            x = torch.where(case.rand(shape) < 0.5, -x, x)
        return x.to(dtype)
    if op in ("cummax", "cummin"):
        if case.choose("values", ["normal", "quantized"], [2, 1]) == "quantized":
            return (torch.round(z * 2) / 2 + 0.25).to(dtype)  # many ties, never 0
        return z.to(dtype)
    if op == "logcumsumexp":
        return (z * case.set("scale", round(case.rng.uniform(0.5, 3.0), 2))).to(dtype)
    return z.to(dtype)


SPECIALS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def sprinkle_specials(case: Case, x: Tensor) -> bool:
    """With chance 1/4, puts NaN, +inf or -inf (all of one kind, -inf, what masked positions of
    logcumsumexp hold, twice as often as NaN or +inf alone; or mixed) at 1 to 8 random places of
    the float tensor ``x``; whether it did. Each op's
    rules for them (scan.h: IEEE arithmetic, a NaN wins cummax and cummin with its own index, an
    infinite maximum absorbs logcumsumexp) must match PyTorch's forward exactly."""
    if not x.is_floating_point() or not case.chance(0.25):
        return False
    kinds = case.choose("specials", ["nan", "inf", "-inf", "mixed"], [1, 1, 2, 2])
    count = case.set("special_count", case.rng.randint(1, 8))
    places = case.randperm(x.numel())[:count]
    picks = [kinds] * count if kinds != "mixed" else case.rng.choices(list(SPECIALS), k=count)
    values = torch.tensor([SPECIALS[k] for k in picks], dtype=x.dtype, device=x.device)
    x.view(-1)[places] = values[: places.numel()]
    return True


def logcumsumexp_grad(x: Tensor, y: Tensor, dy: Tensor, dim: int, reverse: bool) -> Tensor:
    """scan.h's gradient dx_j = sum_{i >= j} dy_i exp(x_j - y_i) (i <= j with reverse), in f64
    from the op's own y: the reference for 16-bit floats, whose backward reads y as saved,
    rounded to the dtype (torch's f64 y would differ from it by that rounding, up to a few
    percent of the gradient in bf16)."""
    x, y, dy = x.double(), y.double(), dy.double()
    terms = dy * torch.exp(-y)
    partial = terms.cumsum(dim) if reverse else terms.flip(dim).cumsum(dim).flip(dim)
    return torch.exp(x) * partial


def _scan_case(case: Case) -> None:
    rng = case.rng
    op = case.choose("op", SCAN_OPS)
    ints = 1.5 if op in ("cumsum", "cumprod") else 0.0
    dtypes = [F32, torch.float16, torch.bfloat16, F64, torch.int32, torch.int64]
    dtype = case.choose("dtype", dtypes, [6, 3, 3, 2, ints, ints])
    rank = case.choose("rank", [1, 2, 3], [2, 3, 2])
    length = rng.choice(SCAN_LENGTHS) if case.chance(0.35) else log_uniform(rng, 1, 2**20)
    rows = 1 if rank == 1 else log_uniform(rng, 1, max(1, MAX_ELEMENTS // length))
    dim = rng.randrange(rank)
    others = [rows]
    if rank == 3:
        first = log_uniform(rng, 1, rows)
        others = [first, max(1, rows // first)]
    shape = case.set("shape", others[:dim] + [length] + others[dim:] if rank > 1 else [length])
    dim_arg = case.set("dim", dim - rank if case.chance(0.3) else dim)
    reverse = case.choose("reverse", [False, True])
    no_expand = (dim,) if op == "cumprod" else ()  # v^n overflows
    base_shape, view = strided_layout(case, shape, no_expand)
    base = scan_data(case, op, dtype, base_shape, length)
    specials = sprinkle_specials(case, base)
    floating = dtype.is_floating_point
    function = getattr(O, op)
    dy = case.randn(shape).to(dtype) if floating else None
    path = case.path()

    def run() -> tuple[ScanResult, Optional[Tensor]]:
        leaf = base.clone().requires_grad_(floating)
        with path():
            result = function(view(leaf), dim_arg, reverse=reverse)
            if floating:
                _values(result).backward(dy)
        return result, leaf.grad

    result, grad = run()
    x = view(base)
    values = _values(result)
    assert values.dtype == dtype, f"{op}: output dtype {values.dtype}"

    # Forward.
    if not floating:
        want = scan_reference(op, x.long(), dim_arg, reverse)
        check_equal(values.long(), _values(want), f"{op} (integers, exact)")
    else:
        x64 = x.double()
        want = scan_reference(op, x64, dim_arg, reverse)
        y = _values(want)
        tol = tolerance(dtype, length)
        if op in ("cummax", "cummin"):
            assert isinstance(result, tuple) and isinstance(want, tuple)
            check_equal(result[0], want[0].to(dtype), f"{op} values (exact)")
            check_equal(result[1], want[1], f"{op} indices (exact)")
        elif op == "cumsum":
            bound = _values(scan_reference("cumsum", x64.abs(), dim_arg, reverse))
            check_close(values, y, bound, tol, "cumsum")
        elif op == "cumprod" and case.config.get("factors") == "powers of two" and not specials:
            check_equal(values, y.to(dtype), "cumprod (powers of two, exact)")
        elif op == "cumprod":
            check_close(values, y, y.abs(), product_tolerance(dtype, length), "cumprod",
                        atol=torch.finfo(dtype).tiny)
        else:
            check_close(values, y, 1 + y.abs(), tol, "logcumsumexp")

    # Backward: torch's autograd of the f64 reference on the same view of the same data. With
    # NaN or infinities in x only the gradients that do not read x's values are compared (those of
    # cumsum, and of cummax and cummin, which follow the indices): cumprod's and logcumsumexp's
    # are formed otherwise than torch's (scan.h) and legitimately differ there.
    if floating and (not specials or op in ("cumsum", "cummax", "cummin")):
        assert grad is not None and dy is not None
        dy64 = dy.double()

        def torch_grad(source: Tensor, upstream: Tensor) -> Tensor:
            leaf = leaf64(source)
            _values(scan_reference(op, view(leaf), dim_arg, reverse)).backward(upstream)
            assert leaf.grad is not None
            return leaf.grad

        if op == "logcumsumexp" and dtype in HALF:
            y_got = values.detach()
            grad_view = logcumsumexp_grad(x, y_got, dy64, dim_arg, reverse)
            bound_view = logcumsumexp_grad(x, y_got, dy64.abs(), dim_arg, reverse)
            want_grad = grad_to_base(base, view, grad_view)
            bound = grad_to_base(base, view, bound_view)
        else:
            want_grad = torch_grad(base, dy64)
            # The sum of the magnitudes of the terms of each gradient element.
            bound = torch_grad(base.abs() if op == "cumprod" else base, dy64.abs())
        tol = product_tolerance(dtype, length) if op == "cumprod" else tolerance(dtype, length)
        check_close(grad, want_grad, bound, tol, f"{op} backward", atol=torch.finfo(dtype).tiny)

    # Determinism.
    again, grad_again = run()
    first = list(result) if isinstance(result, tuple) else [result]
    second = list(again) if isinstance(again, tuple) else [again]
    names = ["values", "indices"][: len(first)] + ["grad"]
    check_rerun(first + [grad], second + [grad_again], names)


@pytest.mark.parametrize("seed", _seeds("scans"), ids=_seed_id)
def test_scans(seed: int) -> None:
    """cumsum, cumprod, cummax, cummin and logcumsumexp: ranks 1-3, scanned lengths up to 2^20
    (log-uniform, tile boundaries favoured), few or many rows, any dim (negative too), both
    directions, f32/f16/bf16/f64 and int32/int64 (cumsum, cumprod), contiguous, transposed,
    stepped, offset and expanded inputs, ties, NaN and infinities, exact products of powers of
    two; forward, backward and a bit-identical rerun."""
    case = Case("scans", seed)
    with reported(case):
        _scan_case(case)


# ---- segment reductions -------------------------------------------------------------------------

SEGMENT_COLUMNS = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129,
                   255, 256, 300]


def segment_ids(case: Case, n: int, segments: int, host: bool) -> Tensor:
    """int64 ids on the GPU: uniform, skewed (a power law over randomly relabelled segments: a
    few huge ones, many tiny), or from a small subset of the segments; some out of range on
    either side (host ids: only negative ones, as an id >= num_segments is an error there)."""
    rng = case.rng
    if segments == 0:
        return case.randint(-3, 5, [n])
    distribution = case.choose("ids", ["uniform", "skewed", "subset"], [2, 2, 1])
    if distribution == "uniform":
        ids = case.randint(0, segments, [n])
    elif distribution == "skewed":
        power = case.set("power", rng.choice([1.0, 3.0]))
        ranks = torch.floor(segments ** (case.rand([n]) ** power)).long() - 1
        ids = case.randperm(segments)[ranks.clamp(0, segments - 1)]
    else:
        chosen = case.randperm(segments)[: log_uniform(rng, 1, min(segments, 64))]
        ids = chosen[case.randint(0, chosen.numel(), [n])]
    if case.chance(0.5):
        fraction = case.set("out_of_range", round(rng.uniform(0.0, 0.2), 3))
        u = case.rand([n])
        ids = torch.where(u < fraction / 2, -case.randint(1, 1000, [n]), ids)
        if not host:
            high = (u >= fraction / 2) & (u < fraction)
            beyond = torch.where(case.rand([n]) < 0.5, case.randint(0, 3, [n]),
                                 case.randint(0, 1000, [n]))  # often exactly num_segments
            ids = torch.where(high, segments + beyond, ids)
    return ids


def extremum_grad(data: Tensor, ids: Tensor, segments: int, out: Tensor, grad: Tensor) -> Tensor:
    """segment.h's max/min gradient in f64: grad[s, d] split equally among the rows i of
    segment s with data[i, d] == out[s, d] (TensorFlow's rule for ties); 0 for other rows."""
    if segments == 0:
        return torch.zeros_like(data)
    ids = ids.to(data.device).long()
    keep = (ids >= 0) & (ids < segments)
    index = ids.clamp(0, segments - 1)
    hit = keep.reshape(-1, *[1] * (data.dim() - 1)) & (data == out[index])
    ties = torch.zeros_like(out).index_add(0, index[keep], hit[keep].double())
    return torch.where(hit, grad[index] / ties[index].clamp_min(1), torch.zeros_like(data))


def _segment_case(case: Case) -> None:
    rng = case.rng
    reduction = case.choose("reduction", ["sum", "mean", "max", "min"])
    extremum = reduction in ("max", "min")
    dtype = case.choose("dtype", [F32, torch.float16, torch.bfloat16, F64], [4, 2, 2, 2])
    id_dtype = case.choose("id_dtype", [torch.int32, torch.int64])
    columns = rng.choice(SEGMENT_COLUMNS) if case.chance(0.6) else log_uniform(rng, 1, 300)
    if columns == 1 and case.chance(0.5):
        trailing: list[int] = []  # data of rank 1
    elif columns > 1 and case.chance(0.25):
        divisors = [a for a in range(2, columns) if columns % a == 0]
        a = rng.choice(divisors) if divisors else columns
        trailing = [a, columns // a]
    else:
        trailing = [columns]
    rows = log_uniform(rng, 1, min(2**20, MAX_ELEMENTS // columns))
    shape = case.set("shape", [rows, *trailing])
    mode = case.choose("segments_from", ["log", "rows", "few", "zero"], [5, 3, 2, 0.3])
    if mode == "log":
        segments = log_uniform(rng, 1, 2**20)
    elif mode == "rows":
        segments = max(1, round(rows * rng.choice([1 / 4096, 1 / 64, 1 / 8, 1 / 2, 1, 2, 16])))
    elif mode == "few":
        segments = rng.randint(1, 8)
    else:
        segments = 0
    segments = case.set("num_segments", min(segments, max(1, 2**23 // columns)))
    host = segments > 0 and case.choose("ids_on", ["device", "host"], [6, 1]) == "host"
    ids = segment_ids(case, rows, segments, host)
    sorted_flag = case.choose("sorted", [False, True])
    if sorted_flag or case.chance(0.25):
        ids = ids.sort().values
        case.set("ids_sorted", True)
    ids = ids.to(id_dtype)
    if case.chance(0.15):
        spread = torch.zeros(2 * rows, dtype=id_dtype, device=DEVICE)
        spread[::2] = ids
        ids = spread[::2]
        case.set("ids_strided", True)
    ids_arg = ids.cpu() if host else ids

    # Layout of data (segment.h: trailing dims compact, the leading dim any stride).
    layouts = ["contiguous", "rowstep", "pitch", "offset", "expanded"]
    # Expanded (stride-0) rows: never for max/min (all rows would tie), nor over many rows (the
    # gradient of the expanded view sums rows of one segment, and overflows in f16).
    weights = [4, 2, 2 if trailing else 0, 1, 1 if not extremum and rows <= 2048 else 0]
    layout = case.choose("layout", layouts, weights)
    if layout == "rowstep":
        step = case.set("step", rng.choice([2, 3]))
        base_shape = [rows * step, *trailing]
        view: View = lambda t: t[::step]  # noqa: E731
    elif layout == "pitch":
        pad = case.set("pad", rng.choice([1, 3, 8]))
        base_shape = [rows, trailing[0] + pad, *trailing[1:]]
        view = lambda t: t[:, : trailing[0]]  # noqa: E731
    elif layout == "offset":
        base_shape = [rows + 1, *trailing]
        view = lambda t: t[1:]  # noqa: E731
    elif layout == "expanded":
        base_shape = [1, *trailing]
        view = lambda t: t.expand(*shape)  # noqa: E731
    else:
        base_shape = list(shape)
        view = lambda t: t  # noqa: E731

    # Data: distinct values for max/min in f32/f64 (so that torch's reference sees no ties),
    # or values with many ties (always in 16-bit floats), checked with segment.h's tie rule.
    ties = extremum and (dtype in HALF or case.choose("values", ["distinct", "ties"], [3, 1])
                         == "ties")
    if extremum and not ties:
        count = math.prod(base_shape)
        magnitudes = (case.randperm(count) + 1).double() * 2.0**-20  # exact in f32 below 2^24
        signed = torch.where(case.rand([count]) < 0.5, -magnitudes, magnitudes)
        base = signed.reshape(base_shape).to(dtype)
    elif ties and dtype not in HALF:
        base = (torch.round(case.randn(base_shape) * 2) / 2 + 0.25).to(dtype)
    else:
        base = case.randn(base_shape).to(dtype)
    fill: Optional[float] = None
    if extremum:
        fills = [None, round(rng.uniform(-10, 10), 3) or 1.5, math.inf, -math.inf, math.nan]
        fill = case.choose("fill", fills, [6, 2, 1, 1, 1])
    return_dropped = case.choose("return_dropped", [False, True])
    grad_out = case.randn([segments, *trailing]).to(dtype)
    function = getattr(O, f"segment_{reduction}")
    kwargs: dict[str, Any] = {"sorted": sorted_flag, "return_dropped": return_dropped}
    if extremum:
        kwargs["fill"] = fill
    path = case.path()

    def run() -> tuple[Tensor, Optional[Tensor], Tensor]:
        leaf = base.clone().requires_grad_()
        with path():
            result = function(view(leaf), ids_arg, segments, **kwargs)
            out, dropped = result if return_dropped else (result, None)
            out.backward(grad_out)
        assert leaf.grad is not None
        return out, dropped, leaf.grad

    out, dropped, grad = run()

    # Forward.
    data64 = view(base).double()
    if fill is None:
        info = torch.finfo(dtype)
        empty_value = info.min if reduction == "max" else info.max
    else:  # the fill rounded to the dtype
        empty_value = torch.tensor(fill, dtype=F64).to(dtype).double().item()
    want = segment_reference(data64, ids, segments, reduction, empty_value)
    assert out.dtype == dtype, f"output dtype {out.dtype}"
    ids64 = ids.long()
    valid = (ids64 >= 0) & (ids64 < segments)
    largest = int(torch.bincount(ids64[valid], minlength=1).max()) if segments else 0
    if extremum:
        check_equal(out, want.to(dtype), f"segment_{reduction} (exact)")
    else:
        bound = segment_reference(data64.abs(), ids, segments, reduction, 0.0)
        check_close(out, want, bound, tolerance(dtype, largest), f"segment_{reduction}",
                    atol=floor(dtype))
    if return_dropped:
        assert dropped is not None
        assert dropped.dtype == torch.int64 and dropped.dim() == 0, \
            f"dropped: {dropped.dtype} of shape {tuple(dropped.shape)}"
        want_dropped = int((ids64 >= segments).sum())
        got_dropped = int(dropped)
        assert got_dropped == want_dropped, f"dropped count {got_dropped}, expected {want_dropped}"

    # Backward.
    grad64 = grad_out.double()
    if ties:
        want_grad = grad_to_base(base, view, extremum_grad(data64, ids, segments, want, grad64))
        bound_view = extremum_grad(data64, ids, segments, want, grad64.abs())
        bound = grad_to_base(base, view, bound_view)
    else:
        def torch_grad(upstream: Tensor) -> Tensor:
            # Max/min: empty segments NaN, which equals no row, so that torch's split among
            # the rows equal to the result never counts the fill (include_self=False).
            leaf = leaf64(base)
            segment_reference(view(leaf), ids, segments, reduction, math.nan).backward(upstream)
            assert leaf.grad is not None
            return leaf.grad

        want_grad, bound = torch_grad(grad64), torch_grad(grad64.abs())
    summed = rows if layout == "expanded" else 1  # torch sums the rows of an expanded view
    check_close(grad, want_grad, bound, tolerance(dtype, summed), f"segment_{reduction} backward",
                atol=floor(dtype))

    # Determinism.
    out2, dropped2, grad2 = run()
    check_rerun([out, dropped, grad], [out2, dropped2, grad2], ["out", "dropped", "grad"])


@pytest.mark.parametrize("seed", _seeds("segment_reductions"), ids=_seed_id)
def test_segment_reductions(seed: int) -> None:
    """segment_sum/mean/max/min: N rows up to 2^20, D columns up to 300 (1..9, 16, 17, 32, 64,
    65, 128, 129 and other boundaries favoured; data of rank 1 to 3), S from 0 to 2^20 (far
    fewer and far more than N), uniform, power-law and subset ids, out-of-range ids and the
    dropped count, sorted=True with sorted ids and False with shuffled or sorted ones,
    int32/int64 ids on the device or the host, strided ids, data with a row step, a padded row
    pitch, an offset or stride-0 rows, every float dtype, max/min fills; forward, backward
    (ties split as TensorFlow does) and a bit-identical rerun."""
    case = Case("segment_reductions", seed)
    with reported(case):
        _segment_case(case)


# ---- repeat -------------------------------------------------------------------------------------


def _repeat_case(case: Case) -> None:
    rng = case.rng
    dtypes = [F32, torch.float16, torch.bfloat16, F64, torch.int32, torch.int64]
    dtype = case.choose("dtype", dtypes, [4, 2, 2, 1, 1, 1])
    rank = case.choose("rank", [1, 2, 3, 4])
    shape = [log_uniform(rng, 1, 64) for _ in range(rank)]
    while math.prod(shape) > 2**16:
        shape[shape.index(max(shape))] //= 2
    extra = rng.randint(0, 2)  # leading new dims
    repeats = [rng.choices([1, 2, 3, log_uniform(rng, 1, 64), 0], [8, 3, 2, 4, 0.3])[0]
               for _ in range(rank + extra)]
    padded = [1] * extra + shape
    while math.prod(s * r for s, r in zip(padded, repeats)) > MAX_ELEMENTS:
        i = max(range(len(repeats)), key=lambda j: repeats[j])
        repeats[i] //= 2
    case.set("shape", shape)
    case.set("repeats", repeats)
    style = case.choose("sizes_as", ["ints", "list", "tuple"])
    base_shape, view = strided_layout(case, shape)
    floating = dtype.is_floating_point
    if floating:
        base = case.randn(base_shape, scale=3.0).to(dtype)
    else:
        base = (case.randint(-1000, 1000, base_shape) * 2 + 1).to(dtype)  # odd: never 0
    out_shape = [s * r for s, r in zip(padded, repeats)]
    dy = case.randn(out_shape).to(dtype) if floating else None
    path = case.path()

    def run() -> tuple[Tensor, Optional[Tensor]]:
        leaf = base.clone().requires_grad_(floating)
        x = view(leaf)
        with path():
            if style == "ints":
                y = O.repeat(x, *repeats)
            else:
                y = O.repeat(x, list(repeats) if style == "list" else tuple(repeats))
            if floating:
                y.backward(dy)
        return y, leaf.grad

    y, grad = run()
    check_equal(y, view(base).repeat(*repeats), "repeat (exact copy)")
    if floating:
        assert grad is not None and dy is not None
        # Copies summed per element (and, for an expanded view, torch's sum over its copies).
        copies = math.prod(repeats) * max(1, math.prod(shape) // max(1, math.prod(base_shape)))

        def torch_grad(upstream: Tensor) -> Tensor:
            leaf = leaf64(base)
            view(leaf).repeat(*repeats).backward(upstream)
            assert leaf.grad is not None
            return leaf.grad

        dy64 = dy.double()
        check_close(grad, torch_grad(dy64), torch_grad(dy64.abs()), tolerance(dtype, copies),
                    "repeat backward", atol=floor(dtype))
    y2, grad2 = run()
    check_rerun([y, grad], [y2, grad2], ["y", "grad"])


@pytest.mark.parametrize("seed", _seeds("repeat"), ids=_seed_id)
def test_repeat(seed: int) -> None:
    """repeat(x, *sizes) against x.repeat: ranks 1-4, up to two leading new dims, repeats of
    1, small, large and (rarely) 0, every dtype, strided inputs, sizes as ints, a list or a
    tuple; exact forward, backward against torch, a bit-identical rerun."""
    case = Case("repeat", seed)
    with reported(case):
        _repeat_case(case)


# ---- CTC ----------------------------------------------------------------------------------------


def _ctc_case(case: Case) -> None:
    rng = case.rng
    dtype = case.choose("dtype", [F32, F64], [3, 2])
    T = case.set("T", log_uniform(rng, 1, 1000))
    N = case.set("N", log_uniform(rng, 1, 64))
    C = case.set("C", log_uniform(rng, 2, 100))
    blank = case.set("blank", rng.choices([0, C - 1, rng.randrange(C)], [2, 1, 1])[0])
    reduction = case.choose("reduction", ["none", "sum", "mean"])
    zero_infinity = case.choose("zero_infinity", [False, True])
    labels = [c for c in range(C) if c != blank]
    if case.choose("labels", ["all", "few"], [3, 1]) == "few":  # many repeated labels
        labels = rng.sample(labels, min(len(labels), rng.randint(1, 2)))
    # The longest target, bounded so that torch's alpha and beta stay small.
    cap = max(1, min(256, (2**25 // (T * N) - 1) // 2))
    input_lengths, target_lengths, targets = [], [], []
    for _ in range(N):
        length = T if case.chance(0.3) else (0 if case.chance(0.03) else rng.randint(0, T))
        if case.chance(0.1):  # near or beyond what the input can align
            size = rng.randint(length // 2, length + 3)
        else:
            size = rng.randint(0, min(cap, length))
        size = min(size, cap)
        input_lengths.append(length)
        target_lengths.append(size)
        targets.append([rng.choice(labels) for _ in range(size)])
    case.set("input_lengths", input_lengths)
    case.set("target_lengths", target_lengths)
    # An alignment takes a frame a label, and one more between two equal labels.
    needed = [len(t) + sum(a == b for a, b in zip(t, t[1:])) for t in targets]
    feasible = case.set("feasible", [need <= il for need, il in zip(needed, input_lengths)])

    width = max(1, max(target_lengths) + (rng.randint(0, 3) if case.chance(0.5) else 0))
    if case.choose("padding", ["blank", "labels"]) == "blank":
        padded = torch.full((N, width), blank, dtype=torch.int64)
    else:
        padded = torch.randint(0, C, (N, width), generator=case.generator)
    for n, t in enumerate(targets):
        padded[n, : len(t)] = torch.tensor(t, dtype=torch.int64)
    padded = padded.to(DEVICE)
    target_dtype = case.choose("target_dtype", [torch.int32, torch.int64])
    target_layout = case.choose("targets", ["padded", "concatenated"])
    if target_layout == "padded":
        targets_arg = padded.to(target_dtype)
    else:
        flat = [label for t in targets for label in t]
        targets_arg = torch.tensor(flat, dtype=target_dtype, device=DEVICE)
    length_dtype = case.choose("length_dtype", [torch.int32, torch.int64])
    lengths_on = case.choose("lengths", ["list", "host", "device"])
    il_arg: Union[list[int], Tensor] = list(input_lengths)
    tl_arg: Union[list[int], Tensor] = list(target_lengths)
    if lengths_on != "list":
        where = DEVICE if lengths_on == "device" else torch.device("cpu")
        il_arg = torch.tensor(input_lengths, dtype=length_dtype, device=where)
        tl_arg = torch.tensor(target_lengths, dtype=length_dtype, device=where)
    max_target_length = None
    if target_layout == "concatenated" and lengths_on == "device" and max(target_lengths) > 0:
        extra = rng.choice([0, 0, rng.randint(1, 5)])
        max_target_length = case.set("max_target_length", max(target_lengths) + extra)
    layout = case.choose("log_probs", ["TNC", "NTC-transposed"], [3, 1])
    scale = case.set("logit_scale", round(rng.uniform(0.5, 3.0), 2))
    raw = case.randn([T, N, C] if layout == "TNC" else [N, T, C], scale=scale).to(dtype)

    def log_probs_of(x: Tensor) -> Tensor:
        lp = x.log_softmax(-1)
        return lp if layout == "TNC" else lp.transpose(0, 1)

    def tnc(grad: Tensor) -> Tensor:
        return grad if layout == "TNC" else grad.transpose(0, 1)

    dy = case.randn([N] if reduction == "none" else []).to(dtype)
    path = case.path()

    def run() -> tuple[Tensor, Tensor]:
        x = raw.clone().requires_grad_()
        with path():
            loss = O.ctc_loss(log_probs_of(x), targets_arg, il_arg, tl_arg, blank=blank,
                              reduction=reduction, zero_infinity=zero_infinity,
                              max_target_length=max_target_length)
            loss.backward(dy)
        assert x.grad is not None
        return loss, x.grad

    loss, grad = run()
    assert loss.dtype == dtype, f"loss dtype {loss.dtype}"
    want_shape = (N,) if reduction == "none" else ()
    assert tuple(loss.shape) == want_shape, f"loss shape {tuple(loss.shape)}"

    # Reference: torch's per-sample losses in f64 for the samples it can take (an input of
    # length >= 1, an alignment or zero_infinity); ctc.h's exact values for the others
    # (+inf, or 0 with zero_infinity; 0 for an empty target over an empty input).
    x64 = leaf64(raw)
    il = torch.tensor(input_lengths, device=DEVICE)
    tl = torch.tensor(target_lengths, device=DEVICE)
    per_torch = F.ctc_loss(log_probs_of(x64), padded, il.clamp_min(1), tl, blank=blank,
                           reduction="none", zero_infinity=zero_infinity)
    compared = [il_n > 0 and (ok or zero_infinity) for il_n, ok in zip(input_lengths, feasible)]
    exact = [0.0 if (ok or zero_infinity) else math.inf for ok in feasible]
    per = torch.where(torch.tensor(compared, device=DEVICE), per_torch,
                      torch.tensor(exact, dtype=F64, device=DEVICE))
    per.retain_grad()

    def reduce(values: Tensor) -> Tensor:
        if reduction == "none":
            return values
        if reduction == "sum":
            return values.sum()
        return (values / tl.clamp_min(1)).mean()

    want = reduce(per)
    loss_tol = {F32: 2e-5, F64: 1e-10}[dtype] * (1 + math.sqrt(T) / 8)
    magnitude = per.detach().abs().clamp_min(1).nan_to_num(posinf=1.0)
    check_close(loss, want.detach(), reduce(magnitude), loss_tol, "ctc loss")

    # The gradient with respect to the logits (through log_softmax, after which the exact
    # gradient and torch's agree), for the samples torch can take.
    want.backward(dy.double())
    assert x64.grad is not None and per.grad is not None
    want_grad, got_grad = tnc(x64.grad), tnc(grad)
    columns = [n for n in range(N) if compared[n]]
    if columns:
        index = torch.tensor(columns, device=DEVICE)
        w, g = want_grad[:, index], got_grad[:, index]
        # The logits' gradient of sample n is g_n (softmax - posterior), g_n = d reduced / d
        # loss_n, both terms in [0, 1]: relative to g_n, the error grows with the size of the
        # loss (the log-probabilities summed over up to T frames).
        upstream = per.grad.abs()[index].reshape(1, -1, 1)
        growth = 1 + per.detach()[index].abs().reshape(1, -1, 1) / 10
        check_close(g, w, upstream * growth, {F32: 4e-5, F64: 1e-10}[dtype], "ctc grad")
    for n in range(N):
        if compared[n]:
            continue
        column = got_grad[:, n]
        if input_lengths[n] == 0 or zero_infinity:  # no frame, or an infinite loss zeroed
            assert torch.equal(column, torch.zeros_like(column)), f"ctc grad of sample {n}: not 0"
        else:  # an infinite loss: NaN frames up to the input length, 0 after them (ctc.h)
            frames = input_lengths[n]
            assert torch.isnan(column[:frames]).all(), \
                f"ctc grad of the infeasible sample {n}: not all NaN for t < {frames}"
            rest = column[frames:]
            assert torch.equal(rest, torch.zeros_like(rest)), \
                f"ctc grad of the infeasible sample {n}: not 0 for t >= {frames}"

    loss2, grad2 = run()
    check_rerun([loss, grad], [loss2, grad2], ["loss", "grad"])


@pytest.mark.parametrize("seed", _seeds("ctc_loss"), ids=_seed_id)
def test_ctc_loss(seed: int) -> None:
    """ctc_loss against torch.nn.functional.ctc_loss in f64: T up to 1000, N up to 64, C from
    2 to 100, any blank, targets with many repeats or few, impossible alignments and empty
    inputs with and without zero_infinity, every reduction, padded (blank or label padding)
    and concatenated targets, int32/int64, lengths as lists, CPU or CUDA tensors,
    max_target_length, transposed log_probs, f32 and f64; loss, gradient after log_softmax,
    and a bit-identical rerun."""
    case = Case("ctc_loss", seed)
    with reported(case):
        _ctc_case(case)


# ---- fused linear cross-entropy -----------------------------------------------------------------

FLCE_ROWS = [1, 2, 7, 8, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000, 1024, 1025, 4095, 4096]
FLCE_HIDDEN = [8, 9, 15, 16, 17, 24, 63, 64, 65, 100, 127, 128, 129, 256, 384, 511, 512]
FLCE_VOCAB = [2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 127, 128, 129, 1000, 1023, 1024, 1025, 4095,
              4096, 4097, 8191, 8192]


def _flce_case(case: Case) -> None:
    rng = case.rng
    dtype = case.choose("dtype", [F32, torch.bfloat16])
    V = case.set("V", rng.choice(FLCE_VOCAB) if case.chance(0.5) else log_uniform(rng, 2, 8192))
    H = case.set("H", rng.choice(FLCE_HIDDEN) if case.chance(0.5) else log_uniform(rng, 8, 512))
    BT = rng.choice(FLCE_ROWS) if case.chance(0.5) else log_uniform(rng, 1, 4096)
    BT = case.set("BT", max(1, min(BT, 2**24 // V)))
    has_bias = case.choose("bias", [False, True])
    reduction = case.choose("reduction", ["mean", "sum", "none"])
    ignore_index = case.choose("ignore_index", [-100, -1, rng.randrange(V)], [3, 1, 1])
    smoothing = case.set("label_smoothing",
                         0.0 if case.chance(0.5) else round(rng.uniform(0.01, 0.3), 3))
    softcap = case.set("softcap", None if case.chance(0.6) else round(rng.uniform(2.0, 30.0), 2))
    z_loss = case.set("z_loss_scale",
                      0.0 if case.chance(0.6) else round(rng.uniform(1e-4, 1e-2), 5))
    with_lse = case.choose("with_lse", [False, True], [2, 1])
    zscale = case.set("logit_scale", round(rng.uniform(0.5, 3.0), 2))
    wants = [case.chance(0.75) for _ in range(3)]
    wants[2] = wants[2] and has_bias
    if not any(wants):
        wants[1] = True
    case.set("grads", [name for name, w in zip(("input", "weight", "bias"), wants) if w])

    # Targets: ignored rows (sometimes all of them), and with reduction none or sum sometimes
    # rows whose target is outside [0, V) (flce.h: a NaN loss, no target term in the gradient).
    target = case.randint(0, V, [BT])
    ignored = case.choose("ignored", [0.0, round(rng.uniform(0.0, 0.5), 3), 1.0], [2, 3, 0.3])
    ignore = case.rand([BT]) < ignored
    target = torch.where(ignore, torch.full_like(target, ignore_index), target)
    if reduction != "mean" and case.chance(0.15):
        bad = [v for v in (V, V + 7, -3) if v != ignore_index]
        rows = case.randperm(BT)[: rng.randint(1, min(4, BT))]
        target[rows] = rng.choice(bad)
        case.set("out_of_range_rows", rows.tolist())

    # Layouts (flce.h: rows contiguous with any row stride >= H; bias and target any stride).
    x_pad = case.set("input_pitch_pad", rng.choice([0, 0, 0, 8]))
    w_pad = case.set("weight_pitch_pad", rng.choice([0, 0, 0, 5]))
    b_step = case.set("bias_step", rng.choice([1, 1, 2]))
    t_step = case.set("target_step", rng.choice([1, 1, 2]))
    x_base = case.randn([BT, H + x_pad]).to(dtype)
    w_base = case.randn([V, H + w_pad], scale=zscale / math.sqrt(H)).to(dtype)
    b_base = case.randn([V * b_step], scale=0.5).to(dtype) if has_bias else None

    def rows_view(t: Tensor) -> Tensor:
        return t[:, :H]

    def bias_view(t: Tensor) -> Tensor:
        return t[::b_step]

    target_arg = target
    if t_step == 2:
        spread = torch.zeros(2 * BT, dtype=torch.int64, device=DEVICE)
        spread[::2] = target
        target_arg = spread[::2]
    if reduction == "none":
        upstream = case.randn([BT]).float()
    else:
        scalar = rng.uniform(0.25, 2.0) * rng.choice([1, -1])
        upstream = torch.tensor(scalar, dtype=F32, device=DEVICE)
    function = O.fused_linear_cross_entropy_with_lse if with_lse else O.fused_linear_cross_entropy
    path = case.path()

    def run() -> tuple[Tensor, Optional[Tensor], list[Optional[Tensor]]]:
        leaves = [x_base.clone().requires_grad_(wants[0]), w_base.clone().requires_grad_(wants[1]),
                  b_base.clone().requires_grad_(wants[2]) if b_base is not None else None]
        bias = bias_view(leaves[2]) if leaves[2] is not None else None
        with path():
            result = function(rows_view(leaves[0]), rows_view(leaves[1]), target_arg, bias,
                              ignore_index=ignore_index, label_smoothing=smoothing,
                              softcap=softcap, z_loss_scale=z_loss, reduction=reduction)
            loss, lse = result if with_lse else (result, None)
            loss.backward(upstream)
        return loss, lse, [leaf.grad if leaf is not None else None for leaf in leaves]

    loss, lse, grads = run()
    assert loss.dtype == F32, f"loss dtype {loss.dtype}"
    want_shape = (BT,) if reduction == "none" else ()
    assert tuple(loss.shape) == want_shape, f"loss shape {tuple(loss.shape)}"
    for g, wanted, name in zip(grads, wants, ("input", "weight", "bias")):
        assert (g is not None) == wanted, f"{name}.grad {'missing' if wanted else 'not asked for'}"

    # The reference in f64 (flce.h's formula), differentiated with respect to the logits.
    x64, w64 = rows_view(x_base).double(), rows_view(w_base).double()
    b64 = bias_view(b_base).double() if b_base is not None else None
    z_raw = (x64 @ w64.T + (b64 if b64 is not None else 0.0)).requires_grad_()
    z = softcap * torch.tanh(z_raw / softcap) if softcap else z_raw
    lse_ref = torch.logsumexp(z, -1)
    valid = target != ignore_index
    in_range = (target >= 0) & (target < V)
    z_target = z.gather(1, target.clamp(0, V - 1)[:, None])[:, 0] * in_range
    per = (lse_ref - (1 - smoothing) * z_target - smoothing / V * z.sum(-1)
           + z_loss * lse_ref**2)
    per = torch.where(valid, per, torch.zeros_like(per))
    per.retain_grad()
    count = int(valid.sum())
    nan = torch.full_like(per, math.nan)
    reported_per = torch.where(valid & ~in_range, nan, per).detach()

    def reduce(values: Tensor) -> Tensor:
        if reduction == "none":
            return values
        if reduction == "sum":
            return values.sum()
        return values.sum() / count if count else values.sum() * math.nan  # 0/0, as PyTorch

    # dz bounds the error of every logit: the GEMM's accumulation over H (by Cauchy-Schwarz,
    # from the rows' norms), for 16-bit dtypes the logits' rounding to the dtype, and f32's
    # approximate exp and log a little more.
    z_max = z_raw.detach().abs().max().item()
    z_abs = (x64.norm(dim=1).max() * w64.norm(dim=1).max()).item()
    z_abs += b64.abs().max().item() if b64 is not None else 0.0
    dz = ((UNIT[dtype] if dtype in HALF else 0.0) * z_max
          + 4 * UNIT[F32] * math.sqrt(H) * z_abs + 2.0**-20 * (1 + z_max))
    lse_abs = lse_ref.detach().abs()
    row_error = ((2 + 2 * z_loss * lse_abs) * dz
                 + TOLERANCE[F32] * (1 + per.detach().abs() + lse_abs))
    row_error = torch.where(valid, 2 * row_error, torch.zeros_like(row_error))
    check_close(loss, reduce(reported_per), reduce(row_error), 1.0, "flce loss", atol=1e-30)
    if with_lse:
        assert lse is not None and lse.dtype == F32, "lse missing, or not f32"
        assert tuple(lse.shape) == (BT,), f"lse shape {tuple(lse.shape)}"
        want_lse = torch.where(valid, lse_ref.detach(), torch.zeros_like(lse_ref))
        lse_error = torch.where(valid, 2 * (dz + TOLERANCE[F32] * (1 + lse_abs)), 0.0)
        check_close(lse, want_lse, lse_error, 1.0, "flce lse", atol=1e-30)

    if not (reduction == "mean" and count == 0):  # all rows ignored: the mean is NaN (flce.h)
        reduce(per).backward(upstream.double())
        G = z_raw.grad
        assert G is not None and per.grad is not None
        # A >= |G| elementwise, and bounds the error of G: each row's |d loss / d per_t| times
        # the magnitudes of the terms of the logits' gradient (softmax with the z-loss factor,
        # the smoothing's and the target's).
        p = torch.softmax(z.detach(), -1)
        A = p * (1 + 2 * z_loss * lse_abs + z_loss)[:, None] + smoothing / V
        target_term = ((1 - smoothing) * in_range.double())[:, None]
        A = A.scatter_add(1, target.clamp(0, V - 1)[:, None], target_term)
        A = A * per.grad.abs()[:, None]
        rounding = 2 * UNIT[dtype] if dtype in HALF else 0.0
        checks: list[tuple[str, int, Tensor, View, Tensor, Tensor, int]] = []
        if wants[0]:
            checks.append(("input", 0, x_base, rows_view, G @ w64, A @ w64.abs(), V))
        if wants[1]:
            checks.append(("weight", 1, w_base, rows_view, G.T @ x64, A.T @ x64.abs(), BT))
        if wants[2]:
            assert b_base is not None
            checks.append(("bias", 2, b_base, bias_view, G.sum(0), A.sum(0), BT))
        for name, i, base, view, want_view, bound_view, terms in checks:
            got = grads[i]
            assert got is not None and got.dtype == dtype, f"{name}.grad dtype"
            logit_error = (2 + (1 / softcap if softcap else 0.0)) * dz
            tol = 2 * (logit_error + rounding + 8 * UNIT[F32] * math.sqrt(terms)) + 1e-6
            want_grad = grad_to_base(base, view, want_view)
            bound = grad_to_base(base, view, bound_view)
            check_close(got, want_grad, bound, tol, f"flce {name}.grad", atol=1e-30)

    loss2, lse2, grads2 = run()
    names = ["loss", "lse", "input.grad", "weight.grad", "bias.grad"]
    check_rerun([loss, lse, *grads], [loss2, lse2, *grads2], names)


@pytest.mark.parametrize("seed", _seeds("fused_linear_cross_entropy"), ids=_seed_id)
def test_fused_linear_cross_entropy(seed: int) -> None:
    """fused_linear_cross_entropy (and _with_lse) against the unfused computation in f64: BT up
    to 4096, H from 8 to 512, V from 2 to 8192 (odd sizes and powers of two favoured), f32 and
    bf16, bias or none, ignore_index -100, -1 or a class (no, some or all rows ignored),
    out-of-range targets, label smoothing, softcap, z-loss, every reduction, padded row
    pitches, strided bias and target; loss, lse, the requested gradients (and no others), a
    bit-identical rerun."""
    case = Case("fused_linear_cross_entropy", seed)
    with reported(case):
        _flce_case(case)
