"""Complex arithmetic on split (re, im) real tensors, and the interleaved layout they may share."""

from __future__ import annotations

import warnings

import numpy as np
import torch


def unpack_arith(z: torch.Tensor):
    """``(z.real, z.imag)`` without view ops (torch-xla 2.9's dynamo bridge has no xla kernel for
    ``view_as_real``: ``torch.compile(backend="openxla")`` of a model calling trnplan.fft failed
    there). The cast keeps the real part; ``Re(-i·z) = Im(z)`` exactly (products by 0 and ±1)."""
    real = torch.float64 if z.dtype == torch.complex128 else torch.float32
    if torch.compiler.is_compiling():  # Dynamo cannot trace warnings filters; the warning is not raised at run time
        return z.to(real), (z * -1j).to(real)
    with warnings.catch_warnings():  # "Casting complex values to real discards the imaginary part": meant
        warnings.simplefilter("ignore", UserWarning)
        return z.to(real), (z * -1j).to(real)


def pack_arith(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    """``torch.complex(re, im)`` as ops an accelerator lowers: ``re + i·im`` in the complex dtype
    (exact: the products by 1 and i and the sum with a zero part round nothing)."""
    cdtype = torch.complex128 if re.dtype == torch.float64 else torch.complex64
    return re.to(cdtype) + im.to(cdtype) * 1j


class ComplexBoundary(torch.nn.Module):
    """A split plan module with its complex boundary inside: complex (or, for r2c, real) in,
    complex (or, for c2r, real) out, split and packed by arithmetic, so that the device compiles the
    boundary into the plan's one graph instead of running it as graphs of its own."""

    def __init__(self, module: torch.nn.Module, real_input: bool, real_output: bool):
        super().__init__()
        self.module, self.real_input, self.real_output = module, real_input, real_output

    def forward(self, x: torch.Tensor):
        out = self.module(x) if self.real_input else self.module(*unpack_arith(x))
        return (out[0],) if self.real_output else (pack_arith(out[0], out[1]),)


def cmul(ar: torch.Tensor, ai: torch.Tensor, br: torch.Tensor, bi: torch.Tensor):
    """Elementwise complex product ``(ar + i·ai)(br + i·bi)`` on split tensors (broadcasting)."""
    return ar * br - ai * bi, ar * bi + ai * br


def fused_complex_matrix(w: np.ndarray, *, left: bool) -> np.ndarray:
    """The real 2n×2n matrix that applies the complex matrix ``w`` in one real GEMM.

    One fused real GEMM beats four separate ones by 2–3× on the CPU here
    (../shared/FACTS.md) and is the shape a matrix engine wants.

    ``left=False`` (row vectors, ``y = x @ w``): ``[xr | xi] @ [[wr, wi], [-wi, wr]]``
    gives ``[yr | yi]``.
    ``left=True`` (column vectors, ``y = w @ x``): ``[[wr, -wi], [wi, wr]] @ [xr; xi]``.
    """
    wr, wi = w.real, w.imag
    if left:
        return np.block([[wr, -wi], [wi, wr]])
    return np.block([[wr, wi], [-wi, wr]])


def interleave_order(n: int) -> np.ndarray:
    """The permutation taking the split order ``[re_0 … re_{n-1} | im_0 … im_{n-1}]`` to the
    interleaved order ``[re_0, im_0, re_1, im_1, …]`` (complex64 memory): ``split[order]``."""
    return np.arange(2 * n).reshape(2, n).T.reshape(-1)


def planes_of_one_buffer(re: torch.Tensor, im: torch.Tensor) -> bool:
    """Whether ``re`` and ``im`` are the real and imaginary planes of one interleaved (complex-like)
    buffer, rows of ``2n`` contiguous reals: ``z.real`` and ``z.imag`` of a complex tensor, or the
    planes :func:`planes` returns.

    Only plain eager tensors on the CPU or CUDA are looked at: a traced tensor (FakeTensor,
    FunctionalTensor: torch.compile, torch.export) has no storage to compare, and an XLA tensor's
    storage is not host- or CUDA-addressable; those take the copying path.
    """
    if type(re) is not torch.Tensor or type(im) is not torch.Tensor or torch.compiler.is_compiling():
        return False
    if re.device.type not in ("cpu", "cuda") or re.ndim != 2 or re.shape != im.shape or re.dtype != im.dtype:
        return False
    if re.is_neg() or im.is_neg() or re.is_conj() or im.is_conj():  # lazy negation: the memory holds -value
        return False
    rows, n = re.shape
    if n < 2 or re.stride() != im.stride() or re.stride(1) != 2 or (rows > 1 and re.stride(0) != 2 * n):
        return False
    try:
        same = re.untyped_storage().data_ptr() == im.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # a storage torch cannot show: take the copying path
        return False
    return same and im.storage_offset() == re.storage_offset() + 1 and re.device == im.device


def interleaved(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    """The ``(M, 2n)`` real tensor ``[re_0, im_0, re_1, im_1, …]`` of each row of the ``(M, n)`` pair.

    Free (a view) when the pair are the planes of one interleaved buffer — what a plan's complex64
    input is (``z.real``, ``z.imag``) — else one copy, as the split ``cat([re, im])`` was; inside a
    trace the copy is what the compiler sees and fuses with its consumer (Inductor: one kernel that
    reads the two planes and writes the GEMM's operand, cast included).
    """
    rows, n = re.shape
    if planes_of_one_buffer(re, im):
        return re.as_strided((rows, 2 * n), (2 * n, 1))
    return torch.stack([re, im], dim=-1).view(rows, 2 * n)


def planes(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(re, im)`` views of an interleaved ``(M, 2n)`` real tensor (no copy)."""
    pair = y.view(y.shape[0], -1, 2)
    return pair[..., 0], pair[..., 1]


def pack(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    """``torch.complex(re, im)``, but a view where the pair are the planes of one interleaved
    buffer (a GEMM leaf's output): no pass over the result. The values are the same either way."""
    if planes_of_one_buffer(re, im) and re.storage_offset() % 2 == 0 and re.dtype in (torch.float32, torch.float64):
        rows, n = re.shape
        return torch.view_as_complex(re.as_strided((rows, n, 2), (2 * n, 2, 1)))
    return torch.complex(re, im)


def interleave_planes(re: torch.Tensor, im: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(re, im)`` copied, in one pass, into one new interleaved buffer (any shape, any strides):
    the planes of a contiguous complex-like tensor, which a GEMM leaf then reads and the plan packs
    without another copy (copying re and im separately took two passes and left two buffers)."""
    y = torch.stack([re, im], dim=-1)
    return y[..., 0], y[..., 1]
