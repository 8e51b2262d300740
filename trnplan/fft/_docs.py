"""The numpydoc templates of the torch.fft functions' docstrings (filled in by :mod:`trnplan.fft._basic`)."""

from __future__ import annotations

_PARAMS_1D = """\
    input : torch.Tensor
        {input}
    n : int, optional
        {n}
    dim : int, default -1
        The dimension to transform (negative counts from the end).
    norm : {{"backward", "ortho", "forward"}}, optional
        Scaling, as in torch.fft: ``None`` or "backward" leaves the forward transform unscaled
        and scales the inverse by 1/n; "forward" does the opposite; "ortho" scales both by
        1/√n. ``n`` is the logical (output, for the inverse real transforms) length.{norm_note}
    out : torch.Tensor, optional
        Where to write the result (resized to fit, as torch does); not with autograd."""

_PARAMS_ND = """\
    input : torch.Tensor
        {input}
    s : sequence of int, optional
        {s}
    dim : sequence of int, optional
        The dimensions to transform, in any order, unique, negative allowed; default {dim}.
    norm : {{"backward", "ortho", "forward"}}, optional
        Scaling, as in torch.fft: ``None`` or "backward" leaves the forward transform unscaled
        and scales the inverse by 1/n; "forward" does the opposite; "ortho" scales both by
        1/√n, where n is the product of the logical lengths.{norm_note}
    out : torch.Tensor, optional
        Where to write the result (resized to fit, as torch does); not with autograd."""

_RAISES = """\
    Raises
    ------
    IndexError
        ``dim`` is out of range for ``input``.
    RuntimeError
        A length in ``n``/``s`` (or the input's size along a transformed dimension) is < 1, an
        unknown ``norm``, repeated dims, ``s`` and ``dim`` of different lengths{extra_raise}
        (the same cases and classes as torch.fft).
    UnsupportedDtypeError
        ``input`` is float16, bfloat16 or complex32 (convert with ``x.float()``).
    trnplan.core.errors.TrnplanError
        Planning failed (the message says why)."""

_DOC = """{summary}

{body}

Parameters
----------
{params}

Returns
-------
torch.Tensor
    {returns}

{raises}

Notes
-----
Drop-in for ``torch.fft.{name}``: same signature, semantics and output dtype. The transform
runs as one cached trnplan plan ({plan}); the other dimensions form the plan's batch. A batch
with no transforms (a leading dimension of size 0) returns an empty tensor.{notes}
Gradients flow through it (autograd runs the adjoint plan).

See Also
--------
torch.fft.{name}{see_also}

Examples
--------
>>> import torch
>>> from trnplan import fft as tfft
{examples}
"""

_IN_C = "Input; real, integer or bool input is promoted to complex (float32 → complex64, float64 → complex128)."
_IN_R = "Real input (integer or bool is promoted to the default float dtype); complex input is an error."
_IN_H = "The one-sided Hermitian half-spectrum; real input is promoted to complex."


def _doc(name, summary, body, *, nd, input, length, returns, plan, norm_note="", notes="", see_also="",
         examples, dim="all dimensions (or the last ``len(s)`` when ``s`` is given)", extra_raise=""):
    if nd:
        params = _PARAMS_ND.format(input=input, s=length, dim=dim, norm_note=norm_note)
    else:
        params = _PARAMS_1D.format(input=input, n=length, norm_note=norm_note)
    raises = _RAISES.format(extra_raise=extra_raise)

    def deindent(text):
        return "\n".join(line.removeprefix("    ") for line in text.splitlines())

    return _DOC.format(summary=summary, body=body, params=deindent(params), returns=returns,
                       raises=deindent(raises), name=name, plan=plan, notes=notes,
                       see_also=see_also, examples=examples)


_N_C = "Length of the transform: the input is zero-padded or cropped to ``n`` along ``dim`` (default: its size)."
_S_C = ("Length per transformed dimension: the input is zero-padded or cropped to it; -1 keeps that "
        "dimension's size (default: the input's sizes).")


