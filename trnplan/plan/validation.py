"""Validation of execute()'s inputs (plan_many's arguments are validated by :func:`trnplan.plan.request.make_request`).

Every error names what was expected, what came, and the fix (the house rule).
"""

from __future__ import annotations

import math

import torch


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


__all__ = ["check_layout", "check_pair", "check_tensor", "dtype_name", "wanted"]
