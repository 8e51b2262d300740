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
* It fails where a NeuronCore fails, from the documented rules (../shared/neuron/runtimes.md §2 and
  rule 1; SDK about-neuron/arch/neuron-features/data-types.rst): any op on the device, eager or in a
  compiled graph, whose inputs or outputs are complex, float64 or int64 raises
  :class:`NeuronUnsupported` (NCC_EVRF004-style; a NeuronCore has no complex dtype and no FP64, and
  INT64 becomes INT32 — TorchNeuron would pre-cast silently, refusing is the stricter stand-in); so
  does the allocation of such a tensor on the device (``x.to("neuron")`` of a complex tensor).
* Inside a compiled graph, an ATen op that is not on the documented Neuron op lists (trnplan's
  ``neuron_aten_allowlist.tsv``, each row sourced from the aws-neuron-sdk docs: the 41-op list, ops
  other pages name, ops lowering to HLO ops neuronx-cc lists) raises :class:`NeuronUnsupported`.
  An eager op off those lists falls back to the CPU as TorchNeuron does by default (recorded, and
  listed by the stand-in ``torch_neuronx.get_fallback_ops()``), and raises instead when
  ``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1`` is set (transfers and allocations excepted).
* :func:`install` also puts the distribution metadata of torch-neuronx 2.13.3.0 (TorchNeuron,
  trn2) on ``sys.path`` and a ``torch_neuronx`` module with ``get_fallback_ops()``,
  ``get_executed_ops()`` and ``clear_op_tracking()`` (TNX test files use them: runtimes.md §2).
* :func:`register_compile_backend` registers a dynamo backend named ``"neuron"`` (TorchNeuron's
  name), which runs the captured FX graph op by op on the stand-in under the graph rules above
  (a graph that autograd goes through — an input requiring grad — through AOTAutograd first, as
  TorchNeuron does: its forward and its backward are each a graph of decomposed ATen ops);
  with ``STANDIN_NEURONX_CC_FAILS=1`` it fails as a neuronx-cc error does.

What it does not do: lower or compile anything (no neuronx-cc; AOTAutograd only for graphs
with a gradient), model Trainium numerics (the CPU's fp32 does the arithmetic), fall back to the CPU the
way TorchNeuron's eager ops do, or know which ATen ops neuronx-cc lowers (tests check the recorded
op set against trnplan's Neuron ATen allowlist).
"""

from __future__ import annotations

import importlib.resources
import os
import sys
import tempfile
import types

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import return_and_correct_aliasing
from torch.utils._pytree import tree_flatten, tree_map

#: the stand-in device, ``neuron:0`` (set by :func:`install`: torch knows the name only after the rename)
DEVICE: torch.device | None = None
#: (op name, output dtypes, inside a compiled graph) of every ATen op that ran on the stand-in device
OPS: list[tuple[str, tuple, bool]] = []
#: the FX graphs the "neuron" compile backend was given (Dynamo's capture of each plan)
GRAPHS: list = []
_IN_GRAPH = [False]
_TRACING = [False]  # inside AOTAutograd's tracing of a graph with a gradient (register_compile_backend)
_REFUSED = (torch.complex32, torch.complex64, torch.complex128, torch.float64, torch.int64)
#: eager ops that fell back to the CPU (op names, as TorchNeuron's get_fallback_ops() lists them)
FALLBACK: list[str] = []
#: moving data and allocating are no fallback (they are what the device does)
_TRANSFERS = {"aten::copy_", "aten::_copy_from", "aten::_to_copy", "aten::empty", "aten::empty_strided",
              "aten::_copy_from_and_resize", "aten::detach", "aten::alias", "aten::new_empty_strided",
              "aten::new_empty"}
STANDIN_TORCHNEURON_VERSION = "2.13.3.0"


def _allowlist() -> set[str]:
    """The documented Neuron ATen ops (trnplan ships the sourced list; its rows cite the SDK docs)."""
    text = importlib.resources.files("trnplan.backends.data").joinpath("neuron_aten_allowlist.tsv").read_text()
    return {line.split("\t")[0].strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}


ALLOWED = _allowlist()


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

    name = f"aten::{func._schema.name.split('::', 1)[1]}"
    in_dtypes = tuple(a.dtype for a in flat if isinstance(a, NeuronTensor))
    _refuse_dtypes(str(func), in_dtypes)
    if _IN_GRAPH[0] and name not in ALLOWED:
        raise NeuronUnsupported(f"[stand-in] {func}: {name} is not on the documented Neuron op lists "
                                f"(neuron_aten_allowlist.tsv); neuronx-cc would not lower it")
    tracing = _TRACING[0] or any(isinstance(a, NeuronTensor) and isinstance(a.elem, FakeTensor) for a in flat)  # Dynamo's capture
    if not _IN_GRAPH[0] and not tracing and name not in ALLOWED and name not in _TRANSFERS:
        if os.environ.get("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION") == "1":
            raise NeuronUnsupported(f"[stand-in] {name} has no Neuron implementation and CPU fallback is disabled "
                                    f"(TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1)")
        FALLBACK.append(name)
    to_host = name == "aten::_to_copy" and torch.device(kwargs.get("device") or DEVICE).type == "cpu"
    out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs))
    if to_host:  # .cpu(): a transfer off the device, whatever the dtype
        OPS.append((name, (), _IN_GRAPH[0]))
        return out
    dtypes = tuple(t.dtype for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor))
    OPS.append((name, dtypes, _IN_GRAPH[0]))
    _refuse_dtypes(str(func), dtypes)
    wrapped = tree_map(lambda t: NeuronTensor(t) if isinstance(t, torch.Tensor) and not isinstance(t, NeuronTensor)
                       else t, out)
    if torch.Tag.inplace_view in func.tags:  # x.transpose_(...) (torch.stft does it): the outer tensor's sizes
        # and strides must change too, as they do on a device tensor
        return return_and_correct_aliasing(func, args, kwargs, wrapped)
    return wrapped


def hold_complex() -> None:
    """Make the stand-in a runtime that holds complex64 (none is documented today: tests of what
    trnplan does where one is, together with ``accel.COMPLEX64_RUNTIMES``); float64 and int64 stay refused."""
    global _REFUSED
    _REFUSED = (torch.float64, torch.int64)


def _refuse_dtypes(what: str, dtypes) -> None:
    for dtype in dtypes:
        if dtype in _REFUSED:
            raise NeuronUnsupported(f"[stand-in NCC_EVRF004] {what}: data type {dtype} is not supported on a "
                                    f"NeuronCore (no complex dtype, no FP64, no INT64)")


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
    _install_torch_neuronx()


def _install_torch_neuronx() -> None:
    """torch-neuronx 2.13.3.0's distribution metadata on sys.path (trnplan detects TorchNeuron by it,
    runtimes.md rule 9) and a ``torch_neuronx`` module with the op-tracking functions."""
    site = tempfile.mkdtemp(prefix="standin-torchneuron-")
    info = os.path.join(site, f"torch_neuronx-{STANDIN_TORCHNEURON_VERSION}.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(f"Metadata-Version: 2.1\nName: torch-neuronx\nVersion: {STANDIN_TORCHNEURON_VERSION}\n")
    sys.path.append(site)
    module = types.ModuleType("torch_neuronx")
    module.__version__ = STANDIN_TORCHNEURON_VERSION
    module.get_fallback_ops = lambda: sorted(set(FALLBACK))
    module.get_executed_ops = lambda: sorted({name for name, _, _ in OPS})
    def clear_op_tracking():
        FALLBACK.clear()
        OPS.clear()

    module.clear_op_tracking = clear_op_tracking
    sys.modules["torch_neuronx"] = module


def _run_factory(name, elem, dtype):
    OPS.append((f"aten::{name}", (elem.dtype,), _IN_GRAPH[0]))
    _refuse_dtypes(f"aten.{name}", (elem.dtype,))
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
        if os.environ.get("STANDIN_NEURONX_CC_FAILS") == "1":  # a failed neuronx-cc run, as TorchNeuron reports it
            raise RuntimeError("[stand-in] neuronx-cc failed with exit code 70: ERROR NCC_ISTP902 (see the log in "
                               "the NEFF cache directory)")
        if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs):
            # a graph autograd goes through: TorchNeuron's pipeline is Dynamo → AOTAutograd's forward and
            # backward graphs → … → a NEFF each (runtimes.md §2, D33 torch/compile/about-torch-compile.html),
            # so the backward runs as a graph too, under the graph rules, its ops decomposed by AOTAutograd
            from torch._decomp import core_aten_decompositions
            from torch._dynamo.backends.common import aot_autograd
            from torch._functorch.aot_autograd import make_boxed_func

            def boxed(graph, inputs):  # AOTAutograd calls its compiled graphs with a list of arguments
                return make_boxed_func(_graph_runner(graph, inputs))

            _TRACING[0] = True  # AOTAutograd traces the joint graph now: no op runs on the device
            try:
                return aot_autograd(fw_compiler=boxed, bw_compiler=boxed,
                                    decompositions=core_aten_decompositions())(gm, example_inputs)
            finally:
                _TRACING[0] = False
        return _graph_runner(gm, example_inputs)


def _graph_runner(gm, example_inputs):
    """One compiled graph of the stand-in: recorded, its NEFF cached, run op by op under the graph rules."""
    GRAPHS.append(gm)
    _neff_cache(gm, example_inputs)

    def run(*args):
        _IN_GRAPH[0] = True
        try:
            return gm.forward(*args)
        finally:
            _IN_GRAPH[0] = False

    return run


def _neff_cache(gm, example_inputs) -> None:
    """TorchNeuron's NEFF cache, as the docs describe it (runtimes.md §2): a compiled graph is kept in
    ``TORCH_NEURONX_NEFF_CACHE_DIR`` (default /tmp/neff_cache) under a key of the graph and its input
    signature, and a graph found there is not compiled again. The stand-in writes a placeholder .neff."""
    import hashlib

    where = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR") or "/tmp/neff_cache"
    sig = gm.code + repr([(tuple(t.shape), str(t.dtype)) for t in example_inputs if isinstance(t, torch.Tensor)])
    path = os.path.join(where, hashlib.sha256(sig.encode()).hexdigest()[:24] + ".neff")
    if not os.path.exists(path):
        os.makedirs(where, exist_ok=True)
        with open(path, "w") as f:
            f.write("[stand-in] not a NEFF\n")


def first_run_prelude() -> None:
    """``FIRST_RUN_PRELUDE=neuron_device_standin:first_run_prelude`` for bench/first_run_torchneuron.py:
    the stand-in device and its compile backend, in each process of the script."""
    install()
    register_compile_backend()
