"""The real-to-real transforms, scipy.fft's DCT and DST types I–IV (and their N-D forms) as torch functions.

One r2r plan (kind ``dct1`` … ``dst4``, FFTW's REDFT/RODFT kinds) over the chosen dimensions,
through the same engine call as the torch.fft functions, and the drop-in's shortcut
(:mod:`trnplan.fft._dropin`): a call seen before with the same arguments (the function, the input's
``(shape, dtype, device)``, ``type``, ``n``/``s``, ``dim``, ``norm``), whose full path ran the plan on
the input as given, goes straight to that plan's ready call (one dictionary read). The full path
validates, promotes and resizes, and costs ~5 µs a call more (a 2×1024 float32 DCT-II, measured
here): ~6% of scipy.fft's ~80 µs 64×1024 DCT-II that the benchmark compares against.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from trnplan.fft._args import _check_input, _dims, _finish, _norm, _promote, _resize
from trnplan.fft._dropin import _direct_key
from trnplan.fft._engine import _transform
from trnplan.plan.memo import PLANS


def _r2r(name, x, type, s, dim, norm, out, inverse, nd):
    """dct/dst/idct/idst and their N-D forms: one r2r plan over ``dim`` (scipy.fft's definitions).

    Complex input is transformed as its real and imaginary parts (scipy.fft does the same).
    """
    key = _r2r_key(name, x, type, s, dim, norm) if out is None else None
    if key is not None and not torch.compiler.is_compiling() and not torch._C._is_tracing():
        call = None if x.requires_grad else PLANS.calls.get(key)
        if call is not None:  # this call's plan, run on the input as given before (Plan.direct_calls)
            return call(x)
        plan = PLANS.by_alias(key)
        if plan is not None:
            return plan.execute(x)
    given = x
    _check_input(name, x)
    norm = _norm(name, norm)
    if isinstance(type, bool) or type not in (1, 2, 3, 4):
        raise ValueError(f"{name}(): type must be 1, 2, 3 or 4 (the DCT/DST type), got {type!r}")
    kind = f"{name.removeprefix('i')[:3]}{type}"
    dims, shape = _dims(name, x, s, dim, nd)
    if kind == "dct1" and min(shape, default=2) < 2:
        raise RuntimeError(f"{name}(): the DCT-I is not defined for a length below 2 (its logical length is "
                           f"2(n−1)); got lengths {tuple(shape)}")
    x = _promote(name, x, require_complex=False)
    if not dims:
        return _finish(name, x.clone(), out)
    x = _resize(x, dims, shape)
    if x.is_complex():
        re = _transform(x.real.contiguous(), kind, inverse, dims, shape, norm)
        im = _transform(x.imag.contiguous(), kind, inverse, dims, shape, norm)
        return _finish(name, torch.complex(re, im), out)
    remember = key if x is given else None  # run on the input as given: the next such call may go straight to it
    return _finish(name, _transform(x, kind, inverse, dims, shape, norm, remember), out)


def _r2r_key(name, x, type, s, dim, norm):
    """The shortcut's key of a call (the drop-in's, :func:`~trnplan.fft._dropin._direct_key`, and the
    type), or None where it takes none: ``type`` must be an int exactly (``True`` equals 1 as a key,
    and the full path refuses it)."""
    key = _direct_key(name, x, s, dim, norm)
    return None if key is None or type.__class__ is not int else (*key, type)


def _r2r_doc(name: str, nd: bool) -> str:
    fam = name.removeprefix("i")[:3].upper()
    inverse = name.startswith("i")
    what = f"the inverse {fam}" if inverse else f"the {fam}"
    where = ("over ``dim`` (default: all dimensions, or the last ``len(s)``)" if nd
             else "along ``dim``")
    length = ("s : sequence of int, optional\n    Length per transformed dimension: the input is zero-padded or "
              "cropped to it (-1 keeps a size).\ndim : int or sequence of int, optional\n    The dimensions to "
              "transform." if nd else
              "n : int, optional\n    Length of the transform: the input is zero-padded or cropped to it.\n"
              "dim : int, default -1\n    The dimension to transform.")
    return f"""Compute {what} of type I–IV {where}, as scipy.fft.{name} does, through a cached trnplan plan.

The plan's kind is ``"{fam.lower()}<type>"`` (FFTW's {'REDFT' if fam == 'DCT' else 'RODFT'} kinds); the
planner chooses pocketfft (CPU), one GEMM with the transform's matrix, or a transform through a
child DFT (on an accelerator, a GEMM tree). Differentiable: the backward pass runs the adjoint,
the partner type's plan with diagonal weights. Complex input is transformed as its real and
imaginary parts.

Parameters
----------
input : torch.Tensor
    Real (or complex) input; integer or bool input is promoted to the default float dtype.
type : {{1, 2, 3, 4}}, default 2
    The {fam} type (scipy.fft's definitions; type 1 needs lengths ≥ 2{' for the DCT' if fam == 'DCT' else ''}).
{length}
norm : {{"backward", "ortho", "forward"}}, optional
    scipy.fft's norms: "backward" (None) leaves the forward transform unscaled and scales the
    inverse by 1/L (L = 2(n−1) for DCT-I, 2(n+1) for DST-I, else 2n); "forward" the reverse;
    "ortho" makes it orthonormal (scipy's ``orthogonalize=True``).
out : torch.Tensor, optional
    Where to write the result; not with autograd.

Returns
-------
torch.Tensor
    The transform, the input's dtype (promoted), ``dim`` resized to ``{'s' if nd else 'n'}``.

Raises
------
ValueError
    ``type`` is not 1–4.
RuntimeError
    A bad ``norm``, ``{'s' if nd else 'n'}`` or ``dim``; a DCT-I length below 2.

Examples
--------
>>> import torch
>>> from trnplan import fft as tfft
>>> x = torch.randn(4, 64, dtype=torch.float64)
>>> y = tfft.{'i' if inverse else ''}{fam.lower()}{'n' if nd else ''}(x, type=2, norm="ortho")
"""


def dct(input: torch.Tensor, type: int = 2, n: int | None = None, dim: int = -1, norm: str | None = None, *,
        out: torch.Tensor | None = None) -> torch.Tensor:
    return _r2r("dct", input, type, n, dim, norm, out, inverse=False, nd=False)


def idct(input: torch.Tensor, type: int = 2, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out: torch.Tensor | None = None) -> torch.Tensor:
    return _r2r("idct", input, type, n, dim, norm, out, inverse=True, nd=False)


def dst(input: torch.Tensor, type: int = 2, n: int | None = None, dim: int = -1, norm: str | None = None, *,
        out: torch.Tensor | None = None) -> torch.Tensor:
    return _r2r("dst", input, type, n, dim, norm, out, inverse=False, nd=False)


def idst(input: torch.Tensor, type: int = 2, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out: torch.Tensor | None = None) -> torch.Tensor:
    return _r2r("idst", input, type, n, dim, norm, out, inverse=True, nd=False)


def dctn(input: torch.Tensor, type: int = 2, s: Sequence[int] | None = None,
         dim: int | Sequence[int] | None = None, norm: str | None = None, *,
         out: torch.Tensor | None = None) -> torch.Tensor:
    return _r2r("dctn", input, type, s, dim, norm, out, inverse=False, nd=True)


def idctn(input: torch.Tensor, type: int = 2, s: Sequence[int] | None = None,
          dim: int | Sequence[int] | None = None, norm: str | None = None, *,
          out: torch.Tensor | None = None) -> torch.Tensor:
    return _r2r("idctn", input, type, s, dim, norm, out, inverse=True, nd=True)


def dstn(input: torch.Tensor, type: int = 2, s: Sequence[int] | None = None,
         dim: int | Sequence[int] | None = None, norm: str | None = None, *,
         out: torch.Tensor | None = None) -> torch.Tensor:
    return _r2r("dstn", input, type, s, dim, norm, out, inverse=False, nd=True)


def idstn(input: torch.Tensor, type: int = 2, s: Sequence[int] | None = None,
          dim: int | Sequence[int] | None = None, norm: str | None = None, *,
          out: torch.Tensor | None = None) -> torch.Tensor:
    return _r2r("idstn", input, type, s, dim, norm, out, inverse=True, nd=True)


for _f in (dct, idct, dst, idst, dctn, idctn, dstn, idstn):
    _f.__doc__ = _r2r_doc(_f.__name__, _f.__name__.endswith("n"))
del _f


