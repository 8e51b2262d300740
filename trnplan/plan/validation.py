"""Validation at the plan layer's two doors: plan_many's arguments, and execute()'s inputs.

Every error names what was expected, what came, and the fix (the house rule).
"""

from __future__ import annotations

import math

import torch

from trnplan.backends import accel, get_backend, neuron_runtime
from trnplan.backends.cuda import CORES_ON_CUDA
from trnplan.cache import PlanCache
from trnplan.core.errors import BackendUnavailable, PlanningError
from trnplan.core.problem import EFFORTS, Problem

#: the artifact kinds plan_many's ``compile`` takes
COMPILE_MODES = ("auto", "eager", "aot", "inductor", "neuron", "dynamo", "lazy")


# ---------------------------------------------------------------------- plan_many's arguments
def check_supported(problem: Problem, effort: str) -> None:
    """The precision on this backend, cores on CUDA, the effort's name."""
    unsupported = get_backend(problem.device).precision_unsupported_reason(problem.precision)
    if unsupported is not None:
        raise PlanningError(unsupported)
    if problem.cores != 1 and problem.device == "cuda":
        raise PlanningError(CORES_ON_CUDA)
    backend = get_backend(problem.device)
    if problem.cores != 1 and getattr(backend, "accelerator", False):
        raise PlanningError(backend.shard_executor_reason())
    if effort not in EFFORTS:
        raise ValueError(f"effort must be one of {', '.join(map(repr, EFFORTS))}; got {effort!r}")


def resolve_device(problem: Problem, device) -> torch.device:
    """The torch.device the plan runs on (the backend must be available here)."""
    backend = get_backend(problem.device)
    reason = backend.unavailable_reason()
    if reason is not None:
        if problem.device == "neuron" and neuron_runtime.INSTALL_BOTH not in reason:
            # neither runtime: say what was found and how to install each
            reason = f"{reason}. Found: {neuron_runtime.detect().reason}. To {neuron_runtime.INSTALL_BOTH}"
        raise BackendUnavailable(reason)
    if getattr(backend, "accelerator", False):
        return accel.resolve_device(problem.device, device)
    if problem.device == "neuron":
        return torch.device("cpu")  # a traced Neuron model takes and returns host tensors
    dev = torch.device(device)
    if dev.type == "cpu":
        return torch.device("cpu")  # torch has one CPU device: "cpu:0" tensors report "cpu"
    if dev.type == "cuda":
        index = torch.cuda.current_device() if dev.index is None else dev.index
        if index >= torch.cuda.device_count():
            raise ValueError(f"device {str(device)!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
        dev = torch.device("cuda", index)
    return dev


def check_tol(tol) -> None:
    if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol > 0):
        raise ValueError(f"tol must be a positive float (a relative L2 error bound), got {tol!r}")


def check_cache_and_compile(cache, compile: str) -> None:
    if cache is not None and not isinstance(cache, PlanCache):
        raise TypeError(f"cache must be a trnplan.cache.PlanCache or None, got {type(cache).__name__}")
    if compile not in COMPILE_MODES:
        raise ValueError(f"compile must be 'auto', 'eager', 'aot', 'inductor', 'neuron', 'dynamo' or 'lazy'; got "
                         f"{compile!r}")


# ---------------------------------------------------------------------- execute()'s inputs
def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def wanted(p, two: str = "") -> str:
    """What execute() takes, in words (for its TypeErrors)."""
    trailing = ", ".join(map(str, p.in_shape))
    if p.real_input:
        return f"a real {dtype_name(p.real_dtype)} tensor of shape (..., {trailing})"
    return (f"a {p.dtype} tensor of shape (..., {trailing}) or a (re, im) pair of {two}"
            f"{dtype_name(p.real_dtype)} tensors")


def check_tensor(p, x: torch.Tensor) -> None:
    """A tensor input's kind and dtype against the plan's problem ``p``."""
    got = dtype_name(x.dtype)
    if p.real_input:
        if x.is_complex():
            raise TypeError(f"this {p.kind} plan takes real input ({dtype_name(p.real_dtype)}), got a complex {got} "
                            f"tensor; use a c2c plan (kind='c2c') for complex data, or pass x.real")
        if x.dtype != p.real_dtype:
            raise TypeError(f"this {p.kind} plan was made for {dtype_name(p.real_dtype)} input but x is {got}; convert with "
                            f"x.to(torch.{dtype_name(p.real_dtype)}) or plan with dtype=torch.{got}")
        return
    if not x.is_complex():
        raise TypeError(
            f"this {p.kind} plan takes complex input ({p.dtype}), got a real {got} tensor; pass "
            f"torch.complex(x, torch.zeros_like(x)), or the pair (x, torch.zeros_like(x))"
            + ("; for real input to a forward transform plan kind='r2c'" if p.kind == "c2c" else "")
        )
    if x.dtype != p.torch_dtype:
        replan = f" or plan with dtype=torch.{got}" if x.dtype in (torch.complex64, torch.complex128) else ""
        raise TypeError(f"this plan was made for {p.dtype} but x is {got}; convert with x.to(torch.{p.dtype}){replan}")


def check_pair(p, x, device):
    """A ``(re, im)`` pair against the plan's problem ``p``; returns ``(re, im)``."""
    want = dtype_name(p.real_dtype)
    if len(x) != 2 or not all(isinstance(t, torch.Tensor) for t in x):
        types = sorted({type(t).__name__ for t in x})
        raise TypeError(
            f"execute() takes {wanted(p, 'two ')}; got a {type(x).__name__} of {len(x)} item(s) of type(s) {', '.join(types)}"
        )
    re, im = x
    for name, t in (("re", re), ("im", im)):
        if t.is_complex() or t.dtype != p.real_dtype:
            raise TypeError(f"pair input {name} must be {want} (the real dtype of {p.dtype}); "
                            f"got {dtype_name(t.dtype)}")
    if re.shape != im.shape:
        raise ValueError(f"pair input re and im must have the same shape; got {tuple(re.shape)} and {tuple(im.shape)}")
    check_layout(p, device, re, "re")
    check_layout(p, device, im, "im")
    return re, im


def check_layout(p, device, t: torch.Tensor, name: str) -> None:
    """Trailing shape, batch and device of an input against the plan's problem ``p``."""
    want = p.in_shape
    side = {"r2c": " (the real shape)", "c2r": f" (the half spectrum of {p.shape}: last axis {p.shape[-1]}//2+1)"}
    if t.ndim < p.rank or tuple(t.shape[t.ndim - p.rank:]) != want:
        raise ValueError(
            f"{name} has shape {tuple(t.shape)}, but this plan transforms trailing dimension(s) "
            f"{want}{side.get(p.kind, '')}: expected shape (..., {', '.join(map(str, want))}) with leading "
            f"dimensions multiplying to batch={p.batch}"
        )
    leading = math.prod(t.shape[: t.ndim - p.rank])
    if leading == 0:
        raise ValueError(f"{name} has shape {tuple(t.shape)}: it holds no transforms (a leading dimension is 0); "
                         f"this plan takes batch={p.batch}")
    if leading != p.batch:
        raise ValueError(
            f"{name} has shape {tuple(t.shape)}: its leading dimensions multiply to {leading}, but this plan "
            f"was made for batch={p.batch}; plan with batch={leading} (trnplan.plan_many({p.shape}, batch={leading}))"
        )
    if t.device != device:
        raise ValueError(f"{name} is on {t.device} but this plan runs on {device}; move it with "
                         f".to('{device}') or plan with device='{t.device}'")


__all__ = ["check_cache_and_compile", "check_layout", "check_pair", "check_supported", "check_tensor", "check_tol",
           "dtype_name", "resolve_device", "wanted"]
