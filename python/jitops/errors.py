"""Exceptions: one class per ``jitops_status``, each carrying the C library's message.

Every class derives from :class:`jitops.Error` and from the built-in exception a Python user
would expect for that kind of failure, so ``except ValueError`` catches a bad shape and
``except jitops.InvalidShapeError`` catches only ours.
"""

from __future__ import annotations


class Error(Exception):
    """Base class of every libjitops failure. ``status`` is the C status code."""

    status: int = -1
    status_name: str = ""


class InvalidArgumentError(Error, ValueError):
    """A missing argument, or a bad scalar or flag."""

    status, status_name = 1, "JITOPS_ERR_INVALID_ARGUMENT"


class InvalidShapeError(Error, ValueError):
    """A rank, shape or length that does not fit the op."""

    status, status_name = 2, "JITOPS_ERR_INVALID_SHAPE"


class InvalidDtypeError(Error, TypeError):
    """A dtype the op does not take, or tensors whose dtypes disagree."""

    status, status_name = 3, "JITOPS_ERR_INVALID_DTYPE"


class InvalidLayoutError(Error, ValueError):
    """Strides, offsets or alignment the op cannot use (an output that overlaps itself)."""

    status, status_name = 4, "JITOPS_ERR_INVALID_LAYOUT"


class InvalidDeviceError(Error, ValueError):
    """A tensor on another device, or in the wrong kind of memory."""

    status, status_name = 5, "JITOPS_ERR_INVALID_DEVICE"


class OutOfRangeError(Error, ValueError):
    """A value checked on the host (a length, an index) outside its range."""

    status, status_name = 6, "JITOPS_ERR_OUT_OF_RANGE"


class NotFoundError(Error, LookupError):
    """An unknown source name, catalogue entry or cache."""

    status, status_name = 7, "JITOPS_ERR_NOT_FOUND"


class AlreadyExistsError(Error, ValueError):
    """A source name already registered with other contents."""

    status, status_name = 8, "JITOPS_ERR_ALREADY_EXISTS"


class CompileError(Error, RuntimeError):
    """NVRTC failed; the message holds its log."""

    status, status_name = 9, "JITOPS_ERR_COMPILE"


class NoDeviceError(Error, RuntimeError):
    """No CUDA driver or device, or a launch on a compile-only runtime."""

    status, status_name = 10, "JITOPS_ERR_NO_DEVICE"


class DriverError(Error, RuntimeError):
    """A CUDA driver call failed."""

    status, status_name = 11, "JITOPS_ERR_DRIVER"


class OutOfMemoryError(Error, RuntimeError):
    """Host or device memory ran out."""

    status, status_name = 12, "JITOPS_ERR_OUT_OF_MEMORY"


class UnsupportedError(Error, NotImplementedError):
    """Valid, but not supported by this build or device."""

    status, status_name = 13, "JITOPS_ERR_UNSUPPORTED"


class CacheError(Error, RuntimeError):
    """The cache database is unusable, unsafe or corrupt (cache administration only)."""

    status, status_name = 14, "JITOPS_ERR_CACHE"


class FileError(Error, OSError):
    """A file could not be read or written."""

    status, status_name = 15, "JITOPS_ERR_IO"


class InternalError(Error, RuntimeError):
    """A bug in libjitops: please report it."""

    status, status_name = 16, "JITOPS_ERR_INTERNAL"


#: The class of each status, indexed by its value (0, success, has none).
BY_STATUS: tuple[type[Error], ...] = (
    Error,
    InvalidArgumentError,
    InvalidShapeError,
    InvalidDtypeError,
    InvalidLayoutError,
    InvalidDeviceError,
    OutOfRangeError,
    NotFoundError,
    AlreadyExistsError,
    CompileError,
    NoDeviceError,
    DriverError,
    OutOfMemoryError,
    UnsupportedError,
    CacheError,
    FileError,
    InternalError,
)

__all__ = [cls.__name__ for cls in BY_STATUS]
