"""Backends: one per device kind, behind the small protocol in :mod:`trnplan.backends.base`."""

from __future__ import annotations

from trnplan.backends import accel
from trnplan.backends.base import Backend
from trnplan.backends.cpu import CPUBackend
from trnplan.backends.cuda import CUDABackend
from trnplan.backends.neuron import NeuronBackend

_BACKENDS = {"cpu": CPUBackend(), "cuda": CUDABackend(), "neuron": NeuronBackend()}


def get_backend(kind: str) -> Backend:
    """The backend for a device kind: ``"cpu"``, ``"cuda"``; ``"neuron"`` (TorchNeuron's native
    device when :mod:`~trnplan.backends.neuron_runtime` finds it, else the legacy
    ``torch_neuronx.trace`` route); ``"xla"``, ``"meta"`` and a PrivateUse1 backend's name (the
    accelerator backend, :mod:`trnplan.backends.accel`)."""
    if kind in ("cpu", "cuda") or (kind == "neuron" and not accel.torchneuron_present()):
        return _BACKENDS[kind]
    if accel.is_accelerator_kind(kind):
        return accel.backend_for(kind)
    raise ValueError(f"unknown device kind {kind!r}; known: cpu, cuda, neuron, xla, meta and a PrivateUse1 backend's "
                     f"name")


__all__ = ["Backend", "CPUBackend", "CUDABackend", "NeuronBackend", "get_backend"]
