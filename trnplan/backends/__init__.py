"""Backends: one per device kind, behind the small protocol in :mod:`trnplan.backends.base`."""

from __future__ import annotations

from trnplan.backends import accel
from trnplan.backends.base import Backend
from trnplan.backends.cpu import CPUBackend
from trnplan.backends.cuda import CUDABackend
from trnplan.backends.neuron import NeuronBackend
from trnplan.core import state
from trnplan.core.problem import DEVICE_KINDS, register_device_kind

#: one backend per device kind, one line each (the accelerator kinds are made per name by
#: :func:`trnplan.backends.accel.backend_for`); a new device is a Backend subclass in its own
#: file and one :func:`register_backend` call (tests/toy_backend.py shows it)
_BACKENDS = {"cpu": CPUBackend(), "cuda": CUDABackend(), "neuron": NeuronBackend()}
_BUILT_IN = frozenset(_BACKENDS)


def register_backend(backend: Backend) -> None:
    """Add a device kind: ``plan_many(..., device=backend.kind)`` plans with ``backend``.

    Everything that differs by device is a method of :class:`Backend` (resolving the device, its
    fingerprint, probe, compile route, limits, the boundary form, how a plan is built and where
    it runs); the plan layer only asks. Raises ValueError for a kind trnplan already has.
    """
    kind = getattr(backend, "kind", "")
    if not isinstance(backend, Backend) or not kind:
        raise TypeError(f"register_backend takes a Backend instance with a kind; got {backend!r}")
    if kind in DEVICE_KINDS or kind in _BACKENDS:
        raise ValueError(f"device kind {kind!r} already has a backend; unregister_backend({kind!r}) first")
    _BACKENDS[kind] = backend
    register_device_kind(kind)


def unregister_backend(kind: str) -> None:
    """Remove a device kind added with :func:`register_backend` (KeyError if there is none)."""
    if kind in _BUILT_IN or kind not in _BACKENDS:
        raise KeyError(f"no registered backend for device kind {kind!r}")
    del _BACKENDS[kind]
    register_device_kind(kind, present=False)


def get_backend(kind: str) -> Backend:
    """The backend for a device kind: ``"cpu"``, ``"cuda"``; ``"neuron"`` (TorchNeuron's native
    device when :mod:`~trnplan.backends.neuron_runtime` finds it, else the legacy
    ``torch_neuronx.trace`` route); ``"xla"``, ``"meta"`` and a PrivateUse1 backend's name (the
    accelerator backend, :mod:`trnplan.backends.accel`)."""
    if kind in ("cpu", "cuda") or (kind == "neuron" and not accel.torchneuron_present()):
        return _BACKENDS[kind]
    registered = _BACKENDS.get(kind)
    if registered is not None and kind not in _BUILT_IN:
        return registered
    if accel.is_accelerator_kind(kind):
        return accel.backend_for(kind)
    raise ValueError(f"unknown device kind {kind!r}; known: cpu, cuda, neuron, xla, meta and a PrivateUse1 backend's "
                     f"name")


def _reset() -> None:
    """A fresh process: only the built-in backends."""
    for kind in [k for k in _BACKENDS if k not in _BUILT_IN]:
        unregister_backend(kind)


state.register("backends.registered", _reset)


__all__ = ["Backend", "CPUBackend", "CUDABackend", "NeuronBackend", "get_backend", "register_backend",
           "unregister_backend"]
