"""trnplan.dispatch: torch.fft, torch.stft and everything built on them run as trnplan plans on
Trainium-class devices, unchanged.

Every torch.fft function, ``torch.stft`` and ``torch.istft`` reduces to three ATen operators,
``aten::_fft_c2c``, ``aten::_fft_r2c`` and ``aten::_fft_c2r`` (ATen ``SpectralOps.cpp``). On
torch-xla they have no lowering (``executed_fallback_ops()`` lists ``aten::_fft_c2c``: the data
goes to the host and back), and on TorchNeuron the fallback to the CPU is silent
(../shared/neuron/runtimes.md §2, "Unsupported ops fall back to CPU by default"). :func:`install`
registers trnplan kernels for the three operators and their ``.out`` forms under the ``XLA``
dispatch key (torch-xla's ``xla`` device) and the ``PrivateUse1`` key (TorchNeuron's ``neuron``
device, or any PrivateUse1 backend), as Huawei's torch_npu does for its NPU:

* **eager** — each call runs a cached plan: the same in-process plan cache, on-disk wisdom, batch
  buckets and compile route (``torch.compile`` of the whole plan with the device's backend) as
  :mod:`trnplan.fft` on that device. The kernels sit below autograd, so gradients come from
  torch's own derivative formulas (``derivatives.yaml``: ``_fft_c2c`` → ``_fft_c2c`` of the
  other direction, ``_fft_r2c`` → ``_fft_c2c`` + ``real``, ``_fft_c2r`` → ``_fft_r2c``), which
  dispatch back to these kernels.
* **traced** (``torch.compile`` through AOTAutograd — TorchNeuron's ``backend="neuron"``,
  torch-xla's ``"openxla"``, ``torch.export``) — the same operators get a decomposition that
  traces the plan's lowered module into the caller's graph: matrix products, slices,
  concatenations on split real/imaginary tensors, no FFT op, one graph. It is registered with
  the Python dispatcher (``OpOverload.py_impl`` at ``AutogradXLA`` / ``AutogradPrivateUse1``,
  as torch's own ``torch/_decomp`` registers tracing-only decompositions), which is on only while
  a graph is traced, so eager calls never see it. The plan is made outside the trace (the
  tracing modes set aside) with ``compile="eager"``: its module's ops become part of the
  caller's graph, which the caller's backend compiles once. Backward then differentiates
  those ops (the adjoint GEMMs), in the same graph.

CPU and CUDA are never touched: there torch.fft already is the native library (MKL/pocketfft,
cuFFT), and it is trnplan's own leaf on those devices (a trnplan kernel under the CPU key would
call itself through that leaf). Use :mod:`trnplan.fft` there.

Complex tensors: a kernel whose input or output is complex needs the device to hold complex
data. Where the detected runtime cannot (:func:`complex_refusal`), the kernel raises
:class:`ComplexOnDevice`, which names the split API (``Plan.execute`` with an ``(re, im)`` pair,
FFTW's ``fftw_execute_split_dft``); it never moves data to the host behind the caller's back.
Where it can (XLA:CPU), the whole chain — ``rfft`` → complex multiply → ``irfft`` — stays on the
device.

``TRNPLAN_INSTALL=1`` (or a comma-separated list of device kinds) installs at ``import trnplan``
and, for code you cannot edit, at ``import torch``: trnplan declares a ``torch.backends`` entry
point (:mod:`trnplan_autoload`), which torch ≥ 2.5 loads at import
(``TORCH_DEVICE_BACKEND_AUTOLOAD``, default 1, the mechanism TorchNeuron itself autoloads by).
:func:`uninstall` restores torch's kernels.

References
----------
.. [1] PyTorch, ``aten/src/ATen/native/SpectralOps.cpp`` and ``tools/autograd/derivatives.yaml``.
.. [2] Huawei Ascend, torch_npu: ``torch.fft`` on the NPU through registered ATen kernels.
.. [3] M. Frigo and S. G. Johnson, "The design and implementation of FFTW3", Proc. IEEE 93
       (2005): the split-array interface (``fftw_execute_split_dft``).
"""

from __future__ import annotations

import math
import threading
import warnings

import torch

from trnplan.backends import accel, neuron_runtime
from trnplan.core import config, state
from trnplan.core.errors import ComplexOnDevice
from trnplan.core.problem import COMPLEX_OF
from trnplan.plan.api import cached_plan
from trnplan.stft import istft as _trnplan_istft

__all__ = ["ComplexOnDevice", "complex_refusal", "install", "install_from_env", "installed", "uninstall"]

#: the three ATen operators every torch.fft function, torch.stft and torch.istft reduce to
OPERATORS = ("_fft_c2c", "_fft_r2c", "_fft_c2r")
#: ATen's fft_norm_mode (0 none, 1 by 1/√n, 2 by 1/n) as trnplan's norm, per direction: "backward"
#: leaves the forward transform unscaled and scales the inverse by 1/n
_NORM_FORWARD = {0: "backward", 1: "ortho", 2: "forward"}
_NORM_INVERSE = {0: "forward", 1: "ortho", 2: "backward"}
#: the dispatch key of each device kind install() serves
_KEYS = {"xla": "XLA", "privateuse1": "PrivateUse1"}


# ---------------------------------------------------------------------- the complex decision
def complex_refusal(device: torch.device) -> str | None:
    """Why ``device``'s runtime cannot hold a complex tensor, or None where it can.

    * ``xla`` backed by Neuron (torch-neuronx on torch-xla, or ``PJRT_DEVICE=NEURON``): refused.
      neuronx-cc rejects complex data ("Complex data types are not supported on the Neuron
      device", NCC_EVRF004, compiler/error-codes/EVRF004.rst); compiler 2.27.5334 (SDK 2.32) adds
      complex64 to ~30 HLO ops, none of them an FFT (release-notes/components/compiler.rst), and
      no Neuron document says a complex64 tensor may be a graph's input or output: refused.
    * ``xla`` on any other PJRT device (XLA:CPU, TPU, GPU): held (XLA's C64/C128 types).
    * ``neuron`` (TorchNeuron): refused, by rule 1 of runtimes.md §6 (no complex tensor on a
      NeuronCore, a plan's boundary included).
    * any other PrivateUse1 backend: held; its own runtime decides.
    """
    kind = device.type
    if kind not in ("xla", "neuron") or not accel.is_accelerator_kind(kind):
        return None
    boundary = accel.backend_for(kind).boundary(device)  # the device's backend decides (DESIGN.md)
    if boundary.complex:
        return None
    if kind == "xla":
        return (f"the xla device is a NeuronCore here ({neuron_runtime.detect().reason}; PJRT_DEVICE="
                f"{config.pjrt_device() or 'unset'}), and {boundary.why}")
    return f"TorchNeuron's 'neuron' device is a NeuronCore, and {boundary.why}"


def _refuse_complex(op: str, x: torch.Tensor, output_complex: bool) -> None:
    if not (x.is_complex() or output_complex):
        return
    why = complex_refusal(x.device)
    if why is None:
        return
    side = "its input" if x.is_complex() else "its output"
    raise ComplexOnDevice(
        f"aten::{op} on {x.device}: {side} is a complex tensor, and {why}. trnplan does not move it to the host "
        f"behind your back. Keep the data real on the device: plan = trnplan.plan_many(shape, batch, kind=..., "
        f"device='{x.device.type}') and run plan.execute_split((re, im)) (or plan.execute((re, im)), the split "
        f"(re, im) form, FFTW's fftw_execute_split_dft), or move the tensor to the host yourself (x.cpu())")


# ---------------------------------------------------------------------- running one plan
_TRACING = threading.local()


def _wrap(dims, ndim: int) -> list[int]:
    return [d + ndim if d < 0 else d for d in dims]


def _plan(kind: str, shape: tuple, batch: int, cdtype, norm: str, inverse: bool, device, traced: bool):
    if not traced:
        return cached_plan(kind, shape, batch, cdtype, norm, inverse, device)
    # made outside the trace: no tracing mode may see planning's own tensors (constants, probes)
    from torch.utils._python_dispatch import _disable_current_modes  # private (torch ≥ 2.1): imported where used

    with _disable_current_modes(), torch._C._DisablePythonDispatcher(), torch.no_grad():
        return cached_plan(kind, shape, batch, cdtype, norm, inverse, device, compile="eager")


def _allow_constants(x: torch.Tensor) -> None:
    """Let the trace take the plan's constants (DFT matrices, twiddles: real tensors on the device)
    as constants of the graph: the fake-tensor mode converts them, the proxy mode records them.
    Left on for the rest of this compile (its fake mode is the compile's own): the backward pass,
    traced after the forward, saved the same constants (``MmBackward0`` transposes them)."""
    mode = getattr(x, "fake_mode", None) or torch._guards.detect_fake_mode()
    if mode is not None:
        mode.allow_non_fake_inputs = True


def _run(x: torch.Tensor, kind: str, dims: list[int], shape: list[int], inverse: bool, norm: str,
         traced: bool) -> torch.Tensor:
    """One plan over ``dims`` of ``x`` (sized to the plan's input); ``shape`` is the logical
    transform shape in the order of ``dims`` (for r2c/c2r the last of ``dims`` is the halved one)."""
    k, ndim = len(dims), x.ndim
    tail = list(range(ndim - k, ndim))
    moved = dims != tail
    xm = x.movedim(dims, tail) if moved else x
    lead = xm.shape[: ndim - k]
    batch = math.prod(lead)
    cdtype = x.dtype if x.is_complex() else COMPLEX_OF[x.dtype]
    if batch == 0:
        out_tail = (*shape[:-1], shape[-1] // 2 + 1) if kind == "r2c" else tuple(shape)
        dtype = cdtype if kind != "c2r" else x.real.dtype
        y = torch.zeros((*lead, *out_tail), dtype=dtype, device=x.device)
    else:
        plan = _plan(kind, tuple(shape), batch, cdtype, norm, inverse, x.device, traced)
        if traced:
            _allow_constants(x)
            y = plan.run(xm)  # the module's ops, traced into the caller's graph
        else:
            with torch.no_grad():  # below autograd: torch's formula is the graph, not the plan's Function
                y = plan.execute(xm)
    return y.movedim(tail, dims) if moved else y


def _fit_last(x: torch.Tensor, d: int, size: int) -> torch.Tensor:
    """``x`` cropped or zero-padded along ``d`` to ``size`` (c2r reads ``last // 2 + 1`` bins)."""
    have = x.shape[d]
    if have == size:
        return x
    if have > size:
        return x.narrow(d, 0, size)
    pad = [0] * (2 * (x.ndim - d))
    pad[-1] = size - have
    return torch.nn.functional.pad(x, pad)


def _c2c(x, dim, normalization, forward, traced=False):
    _refuse_complex("_fft_c2c", x, True)
    dims = _wrap(list(dim), x.ndim)
    if not dims:
        return x.clone()
    norm = (_NORM_FORWARD if forward else _NORM_INVERSE)[normalization]
    return _run(x, "c2c", dims, [x.shape[d] for d in dims], not forward, norm, traced)


def _r2c(x, dim, normalization, onesided, traced=False):
    _refuse_complex("_fft_r2c", x, True)
    dims = _wrap(list(dim), x.ndim)
    if not onesided:  # the full spectrum of real input: the c2c transform of it, held as complex here
        return _c2c(x.to(COMPLEX_OF[x.dtype]), dims, normalization, True, traced)
    return _run(x, "r2c", dims, [x.shape[d] for d in dims], False, _NORM_FORWARD[normalization], traced)


def _c2r(x, dim, normalization, last_dim_size, traced=False):
    _refuse_complex("_fft_c2r", x, False)
    dims = _wrap(list(dim), x.ndim)
    shape = [x.shape[d] for d in dims[:-1]] + [int(last_dim_size)]
    x = _fit_last(x, dims[-1], shape[-1] // 2 + 1)
    return _run(x, "c2r", dims, shape, True, _NORM_INVERSE[normalization], traced)


def _into(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """torch's ``.out`` contract: resize (as at::native::resize_output does) and copy."""
    if out.shape != y.shape:
        if out.numel():
            warnings.warn(f"an output with one or more elements was resized since it had shape {list(out.shape)}, "
                          f"which does not match the required output shape {list(y.shape)}", UserWarning,
                          stacklevel=3)
        out.resize_(y.shape)
    return out.copy_(y)


def _c2c_out(x, dim, normalization, forward, *, out):
    return _into(out, _c2c(x, dim, normalization, forward))


def _r2c_out(x, dim, normalization, onesided, *, out):
    return _into(out, _r2c(x, dim, normalization, onesided))


def _c2r_out(x, dim, normalization, last_dim_size, *, out):
    return _into(out, _c2r(x, dim, normalization, last_dim_size))


def _istft(x, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False, onesided=None,
           length=None, return_complex=False):
    """torch.istft as trnplan.istft: torch's own overlap-adds with ``aten::unfold_backward``, which
    torch-xla 2.9 runs on the host (``executed_fallback_ops()``), and checks NOLA by reading the
    device (``.item()``: another host fallback); trnplan's overlap-adds with one ``index_add`` and
    checks NOLA on the window on the host. Same semantics, same errors (trnplan.stft's tests)."""
    return _trnplan_istft(x, n_fft, hop_length, win_length, window, center, normalized, onesided, length,
                          return_complex)


def _traced(fn):
    def decomposition(*args, **kwargs):
        return fn(*args, traced=True, **kwargs)

    decomposition.__name__ = f"trnplan_{fn.__name__.lstrip('_')}_decomposition"
    return decomposition


_EAGER = {"_fft_c2c": _c2c, "_fft_r2c": _r2c, "_fft_c2r": _c2r,
          "_fft_c2c.out": _c2c_out, "_fft_r2c.out": _r2c_out, "_fft_c2r.out": _c2r_out}
_DECOMPOSITIONS = {"_fft_c2c": _traced(_c2c), "_fft_r2c": _traced(_r2c), "_fft_c2r": _traced(_c2r)}


# ---------------------------------------------------------------------- install / uninstall
_STATE_LOCK = threading.Lock()
_LIBRARY: list = []  # the torch.library.Library holding the kernels: destroying it restores torch's
_TRACED_KEYS: list = []  # (OpOverload, DispatchKey) of the tracing decompositions


def _kinds(devices) -> list[str]:
    """The dispatch-key kinds ("xla", "privateuse1") for ``devices``."""
    if devices is None:
        return ["xla", "privateuse1"]
    if isinstance(devices, str):
        devices = [devices]
    pu1 = accel.privateuse1_name()
    kinds = []
    for dev in devices:
        name = torch.device(dev).type if not isinstance(dev, str) or ":" in dev else dev.strip()
        if name in ("cpu", "cuda"):
            raise ValueError(f"trnplan.install(devices={devices!r}): {name} keeps torch's own FFT ({'MKL/pocketfft' if name == 'cpu' else 'cuFFT'}), "
                             f"which is also trnplan's leaf there; use trnplan.fft on {name} tensors instead")
        if name == "xla":
            kinds.append("xla")
        elif name in ("privateuse1", "privateuseone", pu1, "neuron"):
            kinds.append("privateuse1")
        else:
            raise ValueError(f"trnplan.install(devices={devices!r}): unknown device kind {name!r}; it serves 'xla' "
                             f"(torch-xla) and the PrivateUse1 backend ({pu1!r} in this process; TorchNeuron's "
                             f"'neuron')")
    return sorted(set(kinds), key=kinds.index)


def install(devices=None) -> list[str]:
    """Make torch.fft, torch.stft and torch.istft run as trnplan plans on accelerator tensors.

    Parameters
    ----------
    devices : str or sequence of str, optional
        ``"xla"`` and/or the PrivateUse1 backend (``"neuron"`` for TorchNeuron, or the name the
        backend registered, or ``"privateuse1"``); default both. ``"cpu"``/``"cuda"`` are refused
        (torch's own FFT stays there).

    Returns
    -------
    list of str
        The dispatch keys now served by trnplan (e.g. ``["XLA", "PrivateUse1"]``).

    Raises
    ------
    ValueError
        An unknown device kind, or ``cpu``/``cuda``.

    Notes
    -----
    Installing twice is a no-op for the keys already served. Kernels run eagerly through the
    plan cache (compiled whole per plan and batch bucket with the device's torch.compile
    backend); under ``torch.compile`` (AOTAutograd) the operators decompose into the plan's
    GEMM ops inside the caller's graph. :func:`uninstall` restores torch's kernels.

    Examples
    --------
    >>> import torch, trnplan
    >>> trnplan.install()  # doctest: +SKIP
    ['XLA', 'PrivateUse1']
    >>> y = torch.fft.rfft(x_on_xla)  # a trnplan plan, no host fallback  # doctest: +SKIP
    """
    kinds = _kinds(devices)
    with _STATE_LOCK:
        served = set(installed())
        new = [_KEYS[k] for k in kinds if _KEYS[k] not in served]
        if not new:
            return installed()
        lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():  # a backend's own kernel is overridden on purpose (restored by uninstall)
            warnings.simplefilter("ignore", UserWarning)
            for key in new:
                for op, fn in _EAGER.items():
                    lib.impl(op, fn, key)
            for key in new:  # torch.istft (CompositeImplicitAutograd) → trnplan.istft on these devices
                lib.impl("istft", _istft, f"Autograd{key}")
        _LIBRARY.append((lib, tuple(new)))
        for key in new:
            dispatch_key = getattr(torch._C.DispatchKey, f"Autograd{key}")
            for op, fn in _DECOMPOSITIONS.items():
                overload = getattr(torch.ops.aten, op).default
                overload.py_impl(dispatch_key)(fn)
                _TRACED_KEYS.append((overload, dispatch_key))
        return installed()


def uninstall() -> None:
    """Restore torch's own kernels (and tracing) for the three FFT operators; a no-op if not installed."""
    with _STATE_LOCK:
        for overload, key in _TRACED_KEYS:
            overload.py_kernels.pop(key, None)
            overload._dispatch_cache.clear()
        _TRACED_KEYS.clear()
        for lib, _ in _LIBRARY:
            lib._destroy()
        _LIBRARY.clear()


def installed() -> list[str]:
    """The dispatch keys trnplan serves now (``[]`` when not installed)."""
    return [key for _, keys in _LIBRARY for key in keys]


def install_from_env(environ=None) -> list[str]:
    """:func:`install` as ``TRNPLAN_INSTALL`` asks: unset, empty or ``0`` nothing; ``1`` the
    default devices; else a comma-separated list of device kinds (``xla,neuron``)."""
    devices = config.install_devices(environ)
    if devices is None:
        return installed()
    return install(devices or None)


#: a fresh process has torch's own FFT kernels (TRNPLAN_INSTALL installs at import, not at reset)
state.register("dispatch.installed", uninstall)
