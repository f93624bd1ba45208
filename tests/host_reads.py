"""A guard against reading tensor values back to the host inside a step (tests/estimators/test_annealing_host_syncs.py,
tests/test_training_host_syncs.py).

A read (``.item()``, ``bool(t)``, ``float(t)``, ``.tolist()``, ...) inside a loop makes a GPU wait for its queue to drain
at every step. On CUDA the guard is ``torch.cuda.set_sync_debug_mode("error")`` (every synchronising operation fails);
on the CPU, where nothing synchronises, the same tests catch the reads the code itself makes, by making those Tensor
methods fail inside the guarded calls.
"""

from __future__ import annotations

import contextlib
import sys
from functools import wraps
from pathlib import Path

import pytest
import torch

READS_ON_CPU_ONLY = {("dbm.py", "_mean_field_block"), ("sampling.py", "uniform_integers"), ("sampling.py", "_bit_generator"),
                     ("sampling.py", "fill_integers")}
"""(file, function) of reads made on purpose only when the tensors are on the CPU, where a read costs no sync: the DBM's
mean field then stops at convergence instead of running its remaining sweeps frozen, and bulk Bernoulli draws seed a
numpy stream from the torch generator (a plain generator's per draw, a ChainStreams block's once, at its first draw) and
fill the integers' buffers through numpy views of them."""
HOST_READS = ("item", "tolist", "numpy", "__bool__", "__float__", "__int__", "__index__", "__format__")
DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")])]


class HostRead(AssertionError):
    pass


_depth = 0


@contextlib.contextmanager
def no_host_reads(device: str):
    """Fail on any read of a tensor value by the host within this block (nested blocks allowed)."""
    global _depth
    if _depth:
        yield
        return
    originals = {name: getattr(torch.Tensor, name) for name in HOST_READS}

    def refuse(name):
        def method(self, *args, **kwargs):
            caller = sys._getframe(1).f_code
            if device == "cpu" and (Path(caller.co_filename).name, caller.co_name) in READS_ON_CPU_ONLY:
                return originals[name](self, *args, **kwargs)
            raise HostRead(f"Tensor.{name} read a value back to the host inside a step")
        return method

    _depth += 1
    for name in HOST_READS:
        setattr(torch.Tensor, name, refuse(name))
    if device == "cuda":
        torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        if device == "cuda":
            torch.cuda.set_sync_debug_mode("default")
        for name, method in originals.items():
            setattr(torch.Tensor, name, method)
        _depth -= 1


def guarded(function, device: str, counter: list[int]):
    @wraps(function)
    def call(*args, **kwargs):
        counter[0] += 1
        with no_host_reads(device):
            return function(*args, **kwargs)
    return call


class GuardedPath:
    """An annealing path whose steps run under :func:`no_host_reads`; everything else is the path's own."""

    def __init__(self, path, device: str, counter: list[int]) -> None:
        self._path = path
        self.log_weight_increment = guarded(path.log_weight_increment, device, counter)
        self.transition = guarded(path.transition, device, counter)
        self.advance = guarded(path.advance, device, counter)
        self.device_advance = guarded(path.device_advance, device, counter)  # the CUDA loop's steps (pfzoo.estimators.cuda_graphs)
        self.device_increment = guarded(path.device_increment, device, counter)

    def __getattr__(self, name):
        return getattr(self._path, name)
