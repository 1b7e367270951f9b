"""The kernel cache, as the ``jitops-cache`` tool sees it: statistics, entries, clearing,
verification, export and import, push to and pull from the remote tier, and prewarming the
built-in ops' common kernels. None of it needs a GPU. ``dir`` None means the default location ($JITOPS_CACHE_DIR, else
$XDG_CACHE_HOME/jitops, else ~/.cache/jitops).

Reading calls (:func:`stats`, :func:`entries`) on a directory without a cache return
nothing; writing calls create the cache.
"""

from __future__ import annotations

import builtins  # annotations say builtins.list: this module's `list` (entries, below) hides it
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Literal, Optional, overload

from . import errors
from ._lib import C

if TYPE_CHECKING:
    from .runtime import Runtime


@dataclass(frozen=True)
class Entry:
    """One cached kernel, or one timed choice (an empty ``lowered_name``)."""

    key: bytes
    op: str
    name_expression: str
    lowered_name: str
    target: str
    options: str
    nvrtc_version: int
    bytes: int
    compile_ms: float
    created: int  # Unix seconds
    last_used: int
    use_count: int

    @property
    def key_hex(self) -> str:
        return self.key.hex()


@dataclass(frozen=True)
class GroupStats:
    """Entries, bytes and usage of one (op, target) group."""

    op: str
    target: str
    entries: int
    bytes: int
    memory_hits: int
    disk_hits: int
    misses: int
    compiles: int
    remote_hits: int
    remote_misses: int
    remote_errors: int


@dataclass(frozen=True)
class PrewarmResult:
    """What :func:`prewarm` did for one architecture."""

    arch: str
    entries: int
    compiled: int
    cached: int
    failures: builtins.list[tuple[str, str]] = field(default_factory=builtins.list)  # (description, error)


@overload
def _opened(dir: Optional[str], writable: Literal[True]) -> AbstractContextManager[int]: ...
@overload
def _opened(dir: Optional[str], writable: Literal[False]) -> AbstractContextManager[Optional[int]]: ...


@contextmanager
def _opened(dir: Optional[str], writable: bool) -> Iterator[Any]:  # int or None, as the overloads say
    """The open cache, or None for a read on a directory that has none."""
    try:
        handle = C.cache_open(dir, int(writable))
    except errors.NotFoundError:
        if writable:
            raise
        handle = None
    try:
        yield handle
    finally:
        if handle is not None:
            C.cache_close(handle)


def path(dir: Optional[str] = None) -> str:
    """The database file (creating the cache when there is none)."""
    with _opened(dir, True) as handle:
        return C.cache_path(handle)


def stats(dir: Optional[str] = None) -> builtins.list[GroupStats]:
    """Entries, bytes, hits and misses by op and target."""
    with _opened(dir, False) as handle:
        return [GroupStats(*row) for row in C.cache_stats(handle)] if handle else []


def entries(op: Optional[str] = None, target: Optional[str] = None,
            dir: Optional[str] = None) -> builtins.list[Entry]:
    """The entries of ``op`` and ``target`` (None: any), most recently used first."""
    with _opened(dir, False) as handle:
        return [Entry(*row) for row in C.cache_list(handle, op, target)] if handle else []


#: The tool's name for :func:`entries`.
list = entries  # noqa: A001 (mirrors `jitops-cache list`)


def clear(op: Optional[str] = None, older_than_days: Optional[float] = None,
          dir: Optional[str] = None) -> int:
    """Removes the entries of ``op`` (None: all) last used more than ``older_than_days`` ago
    (None: regardless of age); returns how many."""
    if older_than_days is not None and older_than_days < 0:
        raise errors.InvalidArgumentError(f"clear: older_than_days must be >= 0; got {older_than_days}")
    with _opened(dir, True) as handle:
        return C.cache_clear(handle, op, -1.0 if older_than_days is None else float(older_than_days))


def verify(dir: Optional[str] = None) -> tuple[int, int]:
    """Recomputes every blob's hash and deletes the rows that do not match; returns
    (checked, dropped)."""
    with _opened(dir, True) as handle:
        return C.cache_verify(handle)


def export(file: str, dir: Optional[str] = None) -> None:
    """Writes a compact copy of the cache to ``file``, which must not exist: ship it with an
    application and open it as the read-only tier ($JITOPS_CACHE_SHIPPED)."""
    with _opened(dir, False) as handle:
        if handle is None:
            raise errors.NotFoundError(f"export: there is no cache in {dir or 'the default location'}")
        C.cache_export(handle, os.fspath(file))


def import_(file: str, dir: Optional[str] = None) -> tuple[int, int]:
    """Adds the entries of an exported file that verify and are new; returns (imported,
    rejected). (``import`` is a Python keyword.)"""
    with _opened(dir, True) as handle:
        return C.cache_import(handle, os.fspath(file))


def push(remote: Optional[str] = None, key: Optional[str] = None, dir: Optional[str] = None) -> int:
    """Publishes every kernel of the local cache that the remote tier (Redis) lacks, signed
    when there is a key; returns how many. ``remote`` and ``key`` None take
    $JITOPS_CACHE_REMOTE and $JITOPS_CACHE_REMOTE_KEY."""
    with _opened(dir, False) as handle:
        if handle is None:
            raise errors.NotFoundError(f"push: there is no cache in {dir or 'the default location'}")
        return C.cache_push(handle, remote, key)


def pull(remote: Optional[str] = None, key: Optional[str] = None, dir: Optional[str] = None) -> tuple[int, int]:
    """Adds every kernel of the remote tier that the local cache lacks and that verifies (and,
    with a key, is signed with it); returns (pulled, rejected)."""
    with _opened(dir, True) as handle:
        return C.cache_pull(handle, remote, key)


def catalogue() -> builtins.list[tuple[str, str]]:
    """The prewarm catalogue: (op, description) of each entry."""
    return [C.catalogue_describe(i) for i in range(C.catalogue_size())]


def prewarm(archs: Iterable[str] = ("sm_90",), *, op: Optional[str] = None, jobs: Optional[int] = None,
            dir: Optional[str] = None,
            progress: Optional[Callable[[str, int, int], None]] = None) -> builtins.list[PrewarmResult]:
    """Compiles the catalogue (or ``op``'s part of it) for each architecture into the cache,
    ``jobs`` at a time (default: the CPU count). ``progress(arch, done, total)`` is called
    after each entry. Failures are returned, not raised; a cache that cannot be written
    raises :class:`jitops.CacheError`."""
    from .runtime import Runtime

    selected = [i for i, (entry_op, _) in enumerate(catalogue()) if op is None or entry_op == op]
    if op is not None and not selected:
        raise errors.NotFoundError(f"prewarm: no catalogue entries for op {op!r}")
    results: builtins.list[PrewarmResult] = []
    for arch in archs:
        with Runtime(arch=arch, cache_dir=dir, cache_mode="readwrite", shipped_cache="") as runtime:
            if not runtime.info.cache_writable:
                raise errors.CacheError(f"prewarm: the cache in {dir or 'the default location'} cannot be written")
            results.append(_prewarm_arch(runtime, arch, selected, jobs, progress))
    return results


def _prewarm_arch(runtime: Runtime, arch: str, selected: builtins.list[int], jobs: Optional[int],
                  progress: Optional[Callable[[str, int, int], None]]) -> PrewarmResult:
    failures: builtins.list[tuple[int, str, str]] = []
    done = 0
    # The workers share the count and the failures; progress is called under the lock too, so
    # that its `done` values arrive in order, one at a time.
    lock = threading.Lock()

    def compile_one(index: int) -> None:
        nonlocal done
        failure = None
        try:
            C.catalogue_compile(runtime.handle, index)
        except errors.Error as error:
            failure = (index, C.catalogue_describe(index)[1], str(error))
        with lock:
            if failure is not None:
                failures.append(failure)
            done += 1
            if progress is not None:
                progress(arch, done, len(selected))

    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        for future in [pool.submit(compile_one, i) for i in selected]:
            future.result()
    stats = runtime.stats()
    in_catalogue_order = [(entry, message) for _, entry, message in sorted(failures)]
    return PrewarmResult(arch, len(selected), stats.compiles, stats.disk_hits, in_catalogue_order)
