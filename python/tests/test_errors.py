"""Each jitops_status maps to one exception class, carrying the C library's message."""

from __future__ import annotations

import pytest

import jitops
from jitops import _C, errors


def test_every_status_has_its_class_in_order():
    for status, cls in enumerate(errors.BY_STATUS[1:], start=1):
        assert cls.status == status
        assert _C.status_string(status) == cls.status_name
        assert issubclass(cls, jitops.Error)


@pytest.mark.parametrize(
    "cls, builtin",
    [
        (jitops.InvalidArgumentError, ValueError),
        (jitops.InvalidShapeError, ValueError),
        (jitops.InvalidDtypeError, TypeError),
        (jitops.InvalidLayoutError, ValueError),
        (jitops.InvalidDeviceError, ValueError),
        (jitops.OutOfRangeError, ValueError),
        (jitops.NotFoundError, LookupError),
        (jitops.CompileError, RuntimeError),
        (jitops.NoDeviceError, RuntimeError),
        (jitops.OutOfMemoryError, RuntimeError),
        (jitops.UnsupportedError, NotImplementedError),
        (jitops.FileError, OSError),
    ],
)
def test_classes_are_also_the_builtin_a_user_catches(cls, builtin):
    assert issubclass(cls, builtin)


def test_c_failure_raises_the_mapped_class_with_the_c_message():
    with pytest.raises(jitops.InvalidArgumentError, match="arch"):
        _C.runtime_create(-1, None, None, 0, 0, None)  # compile-only without an arch
    with pytest.raises(jitops.InvalidArgumentError, match="sm_x"):
        jitops.Runtime(arch="sm_x")


def test_device_runtime_is_shared_or_no_device_error():
    try:
        runtime = jitops.Runtime(0)
    except jitops.NoDeviceError as error:
        assert "driver" in str(error) or "device" in str(error)
    else:
        assert runtime.info.has_device
        assert jitops.Runtime(0) is runtime  # the shared runtime of device 0
