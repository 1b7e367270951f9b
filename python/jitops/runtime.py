"""Runtimes: one per CUDA device, each holding the kernels compiled for it.

``Runtime()`` and ``Runtime(device)`` return the process's shared runtime of that device,
created on first use and kept until the interpreter exits: every op and every kernel on that
device goes through it, so each kernel is compiled or loaded once per process. A runtime
with any other setting (``arch``, a cache directory or mode, a size limit, a shipped tier)
is private to its creator; close it with :meth:`Runtime.close` or a ``with`` block.
``Runtime(arch="sm_90")`` without a device is compile-only: it compiles and caches, and
every launch raises :class:`jitops.NoDeviceError`.
"""

from __future__ import annotations

import atexit
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, TypeVar, Union

from ._lib import C

T = TypeVar("T")

Device = Union[int, str, Any]  # an index, "cuda:1", or a torch.device

_CACHE_MODES = {None: 0, "default": 0, "readwrite": 1, "readonly": 2, "off": 3}


@dataclass(frozen=True)
class RuntimeInfo:
    """What a runtime runs on and where its cache is."""

    device: int  # -1 for a compile-only runtime
    has_device: bool
    arch: int  # 90 for sm_90
    nvrtc_version: int  # 1300 for NVRTC 13.0
    arch_name: str
    device_name: str
    cache_path: str  # "" when the disk tier is off
    cache_writable: bool
    cache_state: str  # "off", "readonly" or "readwrite"
    cache_degraded: bool  # lower than configured (an unsafe directory, a read-only disk, ...)
    cache_reason: str  # why, when degraded
    cache_max_bytes: int


@dataclass(frozen=True)
class RuntimeStats:
    """Counters since the runtime was created; each kernel request is exactly one of a memory
    hit, a shared hit (a kernel another runtime of this process built), a disk hit, a remote
    hit or a miss."""

    memory_hits: int
    disk_hits: int
    misses: int
    compiles: int
    compile_errors: int
    waits: int
    disk_errors: int
    compile_ms: float
    remote_hits: int  # kernels taken, verified, from the remote tier (Redis)
    remote_misses: int
    remote_errors: int  # failed requests, and records refused
    shared_hits: int  # kernels another runtime of this process built (compiled once per arch)
    quick_compiles: int  # of compiles, quick builds of a cold call's kernels (see Runtime.wait_builds)


def device_index(device: Optional[Device]) -> int:
    """The CUDA ordinal of ``device``: None is the current device (PyTorch's, when PyTorch is
    loaded and has initialized CUDA, else 0)."""
    if device is None:
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            return int(torch.cuda.current_device())
        return 0
    if isinstance(device, int):
        return device
    index = getattr(device, "index", None)
    kind = getattr(device, "type", None)
    if kind is not None:
        if kind != "cuda":
            raise ValueError(f"device must be a CUDA device; got {device}")
        return device_index(index)
    if isinstance(device, str):
        kind, _, number = device.partition(":")
        if kind == "cuda":
            return int(number) if number else device_index(None)
    raise ValueError(f"device must be an int, 'cuda[:N]' or a torch.device; got {device!r}")


class Runtime:
    """A libjitops runtime bound to one CUDA device (or compile-only, for one architecture)."""

    _shared: dict[int, "Runtime"] = {}
    _shared_lock = threading.Lock()

    # Set by _create, which makes every instance (object.__new__; there is no __init__).
    handle: int
    shared: bool
    _device_index: int  # the device, or -1 for a compile-only runtime (info.device, kept)
    _registered: set[str]
    _lock: threading.Lock
    _holders: int  # calls in flight on the handle (private runtimes)
    _doomed: int  # a handle close() left to the last call in flight to destroy, else 0

    def __new__(
        cls,
        device: Optional[Device] = None,
        *,
        arch: Optional[str] = None,
        cache_dir: Optional[str] = None,
        cache_mode: Optional[str] = None,
        cache_max_bytes: Optional[int] = None,
        shipped_cache: Optional[str] = None,
    ) -> "Runtime":
        if cache_mode not in _CACHE_MODES:
            raise ValueError(f"cache_mode must be one of {sorted(k for k in _CACHE_MODES if k)}; got {cache_mode!r}")
        private = (arch, cache_dir, cache_mode, cache_max_bytes, shipped_cache) != (None,) * 5
        if private:
            index = -1 if device is None and arch is not None else device_index(device)
            return cls._create(index, arch, cache_dir, cache_mode, cache_max_bytes, shipped_cache, False)
        index = device_index(device)
        with cls._shared_lock:
            runtime = cls._shared.get(index)
            if runtime is None:
                runtime = cls._create(index, None, None, None, None, None, True)
                cls._shared[index] = runtime
            return runtime

    @classmethod
    def _create(cls, index: int, arch: Optional[str], cache_dir: Optional[str], cache_mode: Optional[str],
                cache_max_bytes: Optional[int], shipped_cache: Optional[str], shared: bool) -> "Runtime":
        runtime = object.__new__(cls)
        runtime.handle = C.runtime_create(
            index, arch, cache_dir, _CACHE_MODES[cache_mode], cache_max_bytes or 0, shipped_cache
        )
        runtime.shared = shared
        runtime._device_index = index
        runtime._registered = set()
        runtime._lock = threading.Lock()
        runtime._holders = 0
        runtime._doomed = 0
        return runtime

    # ---- what it is ------------------------------------------------------------------------

    @property
    def info(self) -> RuntimeInfo:
        (device, has_device, arch, nvrtc, arch_name, device_name, path, writable, state, degraded, reason,
         max_bytes) = self._call(C.runtime_info)
        return RuntimeInfo(device, bool(has_device), arch, nvrtc, arch_name, device_name, path, bool(writable),
                           ("off", "readonly", "readwrite")[state], bool(degraded), reason, max_bytes)

    @property
    def device(self) -> int:
        """The CUDA ordinal, or -1 for a compile-only runtime."""
        return self.info.device

    @property
    def arch(self) -> str:
        """The compile target, such as "sm_90"."""
        return self.info.arch_name

    def stats(self) -> RuntimeStats:
        """The cache counters of this runtime."""
        return RuntimeStats(*self._call(C.runtime_stats))

    def wait_builds(self) -> None:
        """Returns once the runtime's background builds are done.

        A built-in op's first call on an empty cache may launch a quick build of a kernel whose
        results do not depend on how it is optimized (the segment reductions; cumsum, cumprod,
        cummax, cummin, and the backwards of cumsum, cummax and cummin): it compiles in a fraction of the
        time, and the full build follows on a background thread. Results are the same bits
        either way; after this call every later launch of those kernels is a full build (call
        it before timing an op on a cold cache). ``JITOPS_QUICK_BUILDS=0`` turns quick builds
        off."""
        self._call(C.runtime_wait_builds)

    # ---- the JIT service -------------------------------------------------------------------

    def register_source(self, name: str, code: str) -> None:
        """Registers CUDA C++ source text under ``name`` in this runtime only (see
        :func:`jitops.register_source` for every runtime)."""
        self._call(C.source_register, name, code)
        with self._lock:
            self._registered.add(name)

    def get_kernel(self, source: str, name_expression: str, options: Iterable[str] = ()) -> "Kernel":
        """The kernel ``name_expression`` of the registered source ``source``; see
        :func:`jitops.get_kernel`."""
        from .jit import get_kernel

        return get_kernel(source, name_expression, options, runtime=self)

    # ---- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Destroys a private runtime (flushing its usage counts to the cache). The work it
        launched must have finished. Calls on it still running in other threads (a compile, a
        launch) finish first, the last of them destroying it; later calls raise ValueError.
        Shared runtimes live until the interpreter exits, and closing one does nothing."""
        if self.shared:
            return
        with self._lock:
            handle, self.handle = self.handle, 0
            if self._holders:
                self._doomed, handle = handle, 0
        if handle:
            C.runtime_destroy(handle)

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the module may be half gone
            pass

    def _live(self) -> int:
        if not self.handle:
            raise ValueError("this runtime was closed")
        return self.handle

    # A call that releases the GIL on the handle holds it (_hold ... _release), so that close()
    # in another thread does not destroy the runtime under it. Shared runtimes are destroyed
    # only at exit, so their calls are not counted.

    def _hold(self) -> tuple[int, bool]:
        """The handle, and whether this call was counted (pass it to _release)."""
        if self.shared:
            return self._live(), False
        with self._lock:
            handle = self._live()
            self._holders += 1
            return handle, True

    def _release(self, counted: bool) -> None:
        if not counted:
            return
        with self._lock:
            self._holders -= 1
            doomed = 0
            if not self._holders:
                doomed, self._doomed = self._doomed, 0
        if doomed:
            C.runtime_destroy(doomed)

    def _call(self, function: Callable[..., T], *args: Any) -> T:
        """``function(handle, *args)``, holding the handle."""
        handle, counted = self._hold()
        try:
            return function(handle, *args)
        finally:
            self._release(counted)

    def __repr__(self) -> str:
        if not self.handle:
            return "<jitops.Runtime (closed)>"
        info = self.info
        where = f"cuda:{info.device} {info.device_name}" if info.has_device else "compile-only"
        return f"<jitops.Runtime {where} {info.arch_name}{' shared' if self.shared else ''}>"


# Called at exit before the shared runtimes are destroyed, by whoever keeps their handles
# outside this module (the torch layer keeps one per device).
before_shared_runtimes_close: list[Callable[[], object]] = []


def _destroy_shared_runtimes() -> None:
    """At exit: finish the GPU's work, then flush each shared runtime's usage counts."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            for index in Runtime._shared:
                torch.cuda.synchronize(index)
    except Exception:  # a broken CUDA state must not break the interpreter's exit
        pass
    with Runtime._shared_lock:  # first, so that a provider asked from here on makes new ones
        shared = list(Runtime._shared.values())
        Runtime._shared.clear()
    for forget in before_shared_runtimes_close:
        forget()
    for runtime in shared:
        runtime.shared = False
        runtime.close()


atexit.register(_destroy_shared_runtimes)

from .jit import Kernel  # noqa: E402  (circular: Kernel refers to Runtime)
