"""Backends: one per device kind, behind the small protocol in :mod:`trnplan.backends.base`."""

from __future__ import annotations

from trnplan.backends.base import Backend
from trnplan.backends.cpu import CPUBackend
from trnplan.backends.cuda import CUDABackend
from trnplan.backends.neuron import NeuronBackend

_BACKENDS = {"cpu": CPUBackend(), "cuda": CUDABackend(), "neuron": NeuronBackend()}


def get_backend(kind: str) -> Backend:
    """The backend for a device kind (``"cpu"``, ``"cuda"``, ``"neuron"``)."""
    try:
        return _BACKENDS[kind]
    except KeyError:
        raise ValueError(f"unknown device kind {kind!r}; known: {', '.join(_BACKENDS)}") from None


__all__ = ["Backend", "CPUBackend", "CUDABackend", "NeuronBackend", "get_backend"]
