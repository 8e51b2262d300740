"""A toy device kind, whole in this one file: what adding a device to trnplan takes.

A new device is a :class:`trnplan.backends.Backend` subclass (this file) and one registry line,
``trnplan.backends.register_backend(ToyBackend())``. Everything that differs by device is a
method or attribute the plan layer asks for; nothing in ``trnplan/plan/`` tests the device kind.

The toy device is a matrix engine without complex data or a native FFT, whose tensors live on
the host (as the torch_neuronx.trace route's do): its plans are GEMM trees taken and returned in
the split ``(re, im)`` form only, and it wraps every plan it builds to count the calls it runs.
"""

from __future__ import annotations

import attrs
import torch

from trnplan.backends import Backend
from trnplan.backends.base import Boundary
from trnplan.backends.cpu import CPU_PROFILE

#: why the toy device refuses complex tensors at a plan's boundary (the refusal quotes it)
NO_COMPLEX = "the toy device holds no complex data"


class CountingRunner:
    """Runs a plan's module and counts the calls (the toy's "runtime")."""

    def __init__(self, module):
        self.module, self.calls = module, 0

    def __call__(self, *inputs):
        self.calls += 1
        return self.module(*inputs)


class ToyBackend(Backend):
    kind = "toy"
    profile = attrs.evolve(CPU_PROFILE, name="toy", fft_gflops={}, source="a toy device (tests/toy_backend.py)")
    precisions = ("fp32", "bf16", "bf16x3", "bf16x6")  # no fp64 on the toy's matrix engine

    def __init__(self):
        self.built: list = []  # the problems this backend built plans for

    def has_native_fft(self, precision: str) -> bool:
        return False

    def device_for(self, device) -> torch.device:
        return torch.device("cpu")  # its tensors live on the host

    def device_argument(self, device):
        return "toy"

    def boundary(self, device) -> Boundary:
        return Boundary(complex=False, views=False, why=NO_COMPLEX)

    def fingerprint(self, device=None) -> dict:
        return {**super().fingerprint(device), "toy_runtime": "1.0"}

    def build(self, request, provide, record_compiled=None):
        got = provide(request)
        self.built.append(request.problem)
        return got, CountingRunner(got.module), attrs.evolve(got.provenance, runs_on="the toy device")
