"""A stand-in for TorchNeuron's PrivateUse1 ``neuron`` device on stock torch, for tests only.

Import it in a child process only (:func:`install` renames PrivateUse1 for good). It makes real
tensors report ``device.type == "neuron"``:

* :func:`install` calls torch's ``torch.utils.backend_registration._setup_privateuseone_for_python_backend``
  (experimental, torch ≥ 2.5; used here on torch 2.13), which renames PrivateUse1 to ``"neuron"``
  (what TorchNeuron's autoload registers), registers a ``torch.neuron`` module
  (``current_device()`` 0, ``device_count()`` 1) and Python device guard/hooks, so that the
  autograd engine accepts ``neuron`` tensors.
* A ``neuron`` tensor is a :class:`NeuronTensor`: a ``torch.Tensor._make_wrapper_subclass`` on
  ``neuron:0`` holding a CPU tensor (``__tensor_flatten__`` makes it traceable by Dynamo). Every
  ATen op on one — and the allocation of ``x.to("neuron")`` / ``device="neuron"`` factories,
  through the PrivateUse1 ``empty`` kernels :func:`install` registers — is recorded in
  :data:`OPS` with its output dtypes, runs on the CPU, and its outputs are wrapped back onto
  ``neuron:0``.
* It fails where a NeuronCore fails: an op in a compiled graph whose result is complex raises
  :class:`NeuronUnsupported` (NCC_EVRF004-style), and any op whose result is float64 raises it
  too (a NeuronCore has no FP64; TorchNeuron would pre-cast it silently — refusing is the
  stricter stand-in).
* :func:`register_compile_backend` registers a dynamo backend named ``"neuron"`` (TorchNeuron's
  name), which runs the captured FX graph op by op on the stand-in and refuses complex (and
  float64) inside it; complex tensors outside a compiled graph are allowed (trnplan's split and
  pack around a plan), float64 nowhere.

What it does not do: lower or compile anything (no neuronx-cc, no AOTAutograd inside the
backend), model Trainium numerics (the CPU's fp32 does the arithmetic), fall back to the CPU the
way TorchNeuron's eager ops do, or know which ATen ops neuronx-cc lowers (tests check the recorded
op set against trnplan's Neuron ATen allowlist).
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import return_and_correct_aliasing
from torch.utils._pytree import tree_flatten, tree_map

#: the stand-in device, ``neuron:0`` (set by :func:`install`: torch knows the name only after the rename)
DEVICE: torch.device | None = None
#: (op name, output dtypes, inside a compiled graph) of every ATen op that ran on the stand-in device
OPS: list[tuple[str, tuple, bool]] = []
#: the FX graphs the "neuron" compile backend was given (Dynamo's capture of each plan)
GRAPHS: list = []
_IN_GRAPH = [False]
_REFUSED = (torch.complex32, torch.complex64, torch.complex128, torch.float64)


class NeuronUnsupported(RuntimeError):
    """What the stand-in raises where a NeuronCore has no support (complex or float64 data)."""


class NeuronTensor(torch.Tensor):
    """A tensor on ``neuron:0`` whose data is a CPU tensor (``.elem``)."""

    @staticmethod
    def __new__(cls, elem: torch.Tensor):
        out = torch.Tensor._make_wrapper_subclass(
            cls, elem.size(), strides=elem.stride(), storage_offset=elem.storage_offset(), dtype=elem.dtype,
            device=DEVICE, requires_grad=elem.requires_grad)
        out.elem = elem
        return out

    def __repr__(self):
        return f"NeuronTensor({self.elem!r})"

    # a traceable wrapper subclass: Dynamo fakeifies the inner CPU tensor
    def __tensor_flatten__(self):
        return ["elem"], None

    @staticmethod
    def __tensor_unflatten__(inner, meta, outer_size, outer_stride):
        return NeuronTensor(inner["elem"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _run(func, args, kwargs or {})


def _on_neuron(obj) -> bool:
    return (isinstance(obj, NeuronTensor) or (isinstance(obj, torch.device) and obj.type == "neuron")
            or (isinstance(obj, str) and obj.startswith("neuron")))


def _device_kernel(func) -> bool:
    """Whether ``func`` has a kernel registered for the device itself (PrivateUse1): TorchNeuron's own
    kernels, or those trnplan.install() registers. On TorchNeuron such a kernel runs; here it must
    run too, rather than the CPU kernel the unwrapping below would reach."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "PrivateUse1")


def _run(func, args, kwargs):
    flat, _ = tree_flatten((args, kwargs))
    if not any(_on_neuron(a) for a in flat):
        return func(*args, **kwargs)
    if _device_kernel(func) and func.name() not in ("aten::empty.memory_format", "aten::empty_strided"):
        return func.redispatch(torch._C.DispatchKeySet(torch._C.DispatchKey.PrivateUse1), *args, **kwargs)

    def unwrap(a):
        if isinstance(a, NeuronTensor):
            return a.elem
        if _on_neuron(a):
            return torch.device("cpu")
        return a

    out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs))
    dtypes = tuple(t.dtype for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor))
    OPS.append((f"aten::{func._schema.name.split('::', 1)[1]}", dtypes, _IN_GRAPH[0]))
    for dtype in dtypes:
        if dtype == torch.float64 or (_IN_GRAPH[0] and dtype in _REFUSED):
            raise NeuronUnsupported(f"[stand-in NCC_EVRF004] {func}: data type {dtype} is not supported on a "
                                    f"NeuronCore (no complex dtype, no FP64)")
    wrapped = tree_map(lambda t: NeuronTensor(t) if isinstance(t, torch.Tensor) and not isinstance(t, NeuronTensor)
                       else t, out)
    if torch.Tag.inplace_view in func.tags:  # x.transpose_(...) (torch.stft does it): the outer tensor's sizes
        # and strides must change too, as they do on a device tensor
        return return_and_correct_aliasing(func, args, kwargs, wrapped)
    return wrapped


_LIB = None


def install() -> None:
    """Register the stand-in ``neuron`` device in this (child) process."""
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    global DEVICE, _LIB
    _setup_privateuseone_for_python_backend(rename="neuron")
    DEVICE = torch.device("neuron", 0)
    # allocation on the device (x.to("neuron"), torch.zeros(..., device="neuron")) reaches these
    # PrivateUse1 kernels; everything else on a NeuronTensor goes through __torch_dispatch__
    _LIB = torch.library.Library("aten", "IMPL")

    def empty(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
        return _run_factory("empty", torch.empty(size, dtype=dtype), dtype)

    def empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
        return _run_factory("empty_strided", torch.empty_strided(size, stride, dtype=dtype), dtype)

    _LIB.impl("empty.memory_format", empty, "PrivateUse1")
    _LIB.impl("empty_strided", empty_strided, "PrivateUse1")


def _run_factory(name, elem, dtype):
    OPS.append((f"aten::{name}", (elem.dtype,), _IN_GRAPH[0]))
    if elem.dtype == torch.float64 or (_IN_GRAPH[0] and elem.dtype in _REFUSED):
        raise NeuronUnsupported(f"[stand-in NCC_EVRF004] aten.{name}: data type {elem.dtype} is not supported on a "
                                f"NeuronCore (no complex dtype, no FP64)")
    return NeuronTensor(elem)


def to_neuron(t: torch.Tensor) -> NeuronTensor:
    """A copy of host tensor ``t`` on the stand-in device (refused for complex/float64, as on a NeuronCore)."""
    return t.to(DEVICE)


def to_cpu(t: NeuronTensor) -> torch.Tensor:
    """The host copy of a stand-in tensor."""
    return t.elem.clone() if isinstance(t, NeuronTensor) else t.cpu()


def register_compile_backend() -> None:
    """Register a dynamo backend named ``"neuron"`` (TorchNeuron's name) that runs the captured
    FX graph as is, op by op on the stand-in: Dynamo's capture is exercised, no compiler is."""
    from torch._dynamo import register_backend

    @register_backend(name="neuron")
    def neuron(gm, example_inputs):
        GRAPHS.append(gm)

        def run(*args):
            _IN_GRAPH[0] = True
            try:
                return gm.forward(*args)
            finally:
                _IN_GRAPH[0] = False

        return run
