"""User kernels on other frameworks' arrays, on a GPU: the launch is ordered after the stream
that produced each array (PyTorch's current stream, a __cuda_array_interface__'s stream, a
DLPack producer given the launch stream), a CUDA-graph capture replays whether PyTorch's
current stream is the capturing one or outside the graph, and an array on another device is
refused.

The ordering tests make the race real: a writer spins ~50 ms on one stream before it stores
a value, and a reader launched right after on another stream must read that value."""

from __future__ import annotations

import numpy as np
import pytest

from gpu import DEVICE, torch

import jitops

SOURCE = """
extern "C" __global__ void late_store(int *flag, int value, long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
  *(volatile int *)flag = value;
}
extern "C" __global__ void read_flag(const int *flag, int *out, int slot) {
  out[slot] = *(const volatile int *)flag;
}
"""
CYCLES = np.int64(100_000_000)  # ~50 ms at the H100's and H200's clocks
ROUNDS = 3


class Interface:
    """A bare __cuda_array_interface__ (version 3) of a tensor, naming `stream`."""

    def __init__(self, tensor, stream):
        self.__cuda_array_interface__ = dict(tensor.__cuda_array_interface__, stream=stream)


class DLPackOnly:
    """A tensor seen only through DLPack."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()

    def __dlpack__(self, **kwargs):  # stream=, and copy= where torch takes it
        return self.tensor.__dlpack__(**kwargs)


def kernels():
    jitops.register_source("tests/interop.cu", SOURCE)
    return jitops.get_kernel("tests/interop.cu", "late_store"), jitops.get_kernel("tests/interop.cu", "read_flag")


def streams():
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    return producer, consumer


@pytest.mark.parametrize("protocol", ["torch", "cuda_array_interface", "dlpack"])
def test_the_launch_waits_for_the_arrays_producer_stream(protocol):
    store, read = kernels()
    producer, consumer = streams()
    flag = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    seen = torch.zeros(ROUNDS, dtype=torch.int32, device=DEVICE)
    torch.cuda.synchronize()
    for slot in range(ROUNDS):
        value = np.int32(1000 + slot)
        with torch.cuda.stream(producer):  # PyTorch's current stream is the producer's
            store(1, 1, (flag, value, CYCLES), stream=producer)
            if protocol == "torch":
                source = flag
            elif protocol == "cuda_array_interface":
                source = Interface(flag, producer.cuda_stream)
            else:
                source = DLPackOnly(flag)  # torch orders the launch stream after its current one
            # `seen` names no stream, so only `source` can order the read after the store.
            read(1, 1, (source, Interface(seen, None), np.int32(slot)), stream=consumer)
    torch.cuda.synchronize()
    assert seen.tolist() == [1000 + slot for slot in range(ROUNDS)]


def test_only_other_streams_are_waited_for():
    """Which streams a launch waits for: an interface's stream unless it is the launch's (0
    and 1 both the legacy default stream), none for an interface without one, and each
    stream once."""
    from jitops.jit import _Arguments

    producer, consumer = streams()
    flag = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    runtime = jitops.Runtime()
    cases = [(consumer.cuda_stream, [None], []), (consumer.cuda_stream, [consumer.cuda_stream], []),
             (0, [1], []), (1, [0], []), (0, [2], [2]),
             (consumer.cuda_stream, [producer.cuda_stream] * 2, [producer.cuda_stream])]
    for launch, named, waited in cases:
        arguments = _Arguments(runtime._live(), runtime.device, launch)
        for position, stream in enumerate(named):
            arguments.value(Interface(flag, stream), position)
        assert arguments.producers == waited, (launch, named)


def test_capture_on_the_current_stream_replays():
    store, read = kernels()
    flag = torch.full((1,), 41, dtype=torch.int32, device=DEVICE)
    seen = torch.zeros(2, dtype=torch.int32, device=DEVICE)
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        read(1, 1, (flag, seen, np.int32(0)), stream=side)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        current = torch.cuda.current_stream()
        store(1, 1, (flag, np.int32(42), np.int64(0)), stream=current)
        read(1, 1, (flag, seen, np.int32(1)), stream=current)
    seen.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert seen.tolist() == [0, 42]


def test_capture_on_another_stream_than_the_producers_replays():
    """Inside a capture, a tensor whose producer (torch's current stream, here a side stream)
    is outside the graph: the launch cannot wait for it (the driver would invalidate the
    capture), so it does not, and the graph replays."""
    store, read = kernels()
    flag = torch.full((1,), 5, dtype=torch.int32, device=DEVICE)
    seen = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    read(1, 1, (flag, seen, np.int32(0)), stream=torch.cuda.current_stream())  # warm-up
    torch.cuda.synchronize()
    graph, outside = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.graph(graph):
        capturing = torch.cuda.current_stream()
        with torch.cuda.stream(outside):  # torch's current stream is now outside the capture
            read(1, 1, (flag, seen, np.int32(0)), stream=capturing)
    seen.zero_()
    flag.fill_(6)
    graph.replay()
    torch.cuda.synchronize()
    assert seen.item() == 6


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs a second GPU")
@pytest.mark.parametrize("protocol", ["torch", "cuda_array_interface", "dlpack"])
def test_an_array_on_another_device_is_refused(protocol):
    _, read = kernels()  # device 0's kernel
    on1 = torch.zeros(4, dtype=torch.int32, device="cuda:1")
    out = torch.zeros(4, dtype=torch.int32, device=DEVICE)
    arg = {"torch": on1, "cuda_array_interface": Interface(on1, None), "dlpack": DLPackOnly(on1)}[protocol]
    with pytest.raises(jitops.InvalidDeviceError, match=r"argument 0.*(cuda:1|device 1's)"):
        read(1, 1, (arg, out, np.int32(0)))
    torch.cuda.synchronize()
