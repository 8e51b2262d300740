"""trnplan.nn: neural-network layers over trnplan plans.

:class:`SpectralConv` is the Fourier neural operator's spectral convolution (Li et al., ICLR 2021,
arXiv:2010.08895) in 1-D, 2-D or 3-D: a truncated rfftn (only the kept frequencies are computed),
a learned complex channel mixing per kept frequency, and a truncated irfftn (only the kept
frequencies are read; the rest are zero). The two transforms are cached truncated plans
(:func:`trnplan.fft.rfftn_truncated`, :func:`trnplan.fft.irfftn_truncated`): on a matrix engine
the pruned GEMM passes do a fraction of a full transform's work, and the planner compares them
with the full transform followed by a cut.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from trnplan import fft as tfft
from trnplan.backends import get_backend
from trnplan.backends.accel import AccelBackend
from trnplan.core.errors import ComplexOnDevice
from trnplan.fft._engine import execute_split_op, kind_word
from trnplan.plan.api import cached_plan

__all__ = ["SpectralConv"]

_EINSUM = {1: "bix,iox->box", 2: "bixy,ioxy->boxy", 3: "bixyz,ioxyz->boxyz"}


def _refuse_complex(device: torch.device) -> None:
    """Complex weights on a device that holds no complex data: refused, naming the split weights."""
    backend = get_backend(device.type)
    if isinstance(backend, AccelBackend) and not backend.boundary(device).complex:
        raise ComplexOnDevice(f"SpectralConv with complex weights on {device}: {backend.boundary(device).why}. Make "
                              f"the layer with split weights, SpectralConv(..., dtype=torch.float32): a real "
                              f"(in, out, *kept, 2) parameter of (re, im), the transforms through execute_split")


class SpectralConv(torch.nn.Module):
    """The FNO spectral convolution: ``irfftn(W · rfftn(x)[kept])`` over the last 1–3 dimensions.

    Parameters
    ----------
    in_channels, out_channels : int
        Channels of the input ``(batch, in_channels, *grid)`` and of the output.
    modes : int or sequence of int
        Kept frequencies per grid dimension (one int: the same for every dimension, and the
        number of dimensions from ``dims``): the lowest ``modes[-1]`` bins of the last dimension
        and the lowest and highest ``modes[i]`` of the others — the FNO's weights
        ``(in, out, 2·m₁, …, m_d)`` (the original's ``weights1``/``weights2`` blocks stacked).
    dims : int, optional
        1, 2 or 3 grid dimensions (default ``len(modes)``, or 1 for an int).
    backend : {"trnplan", "torch"}, default "trnplan"
        "trnplan": truncated plans. "torch": what one writes with torch.fft (rfftn, slice,
        zero-fill, irfftn), the same weights and result: the baseline of bench/spectral.py.
    dtype : torch.dtype, default torch.complex64
        The weights' dtype. Complex (complex64, complex128): one complex parameter
        ``(in, out, *kept)``. Real (float32, float64): **split weights**, one real parameter
        ``(in, out, *kept, 2)`` holding (re, im), the transforms run through the truncated plans'
        ``execute_split`` and the mixing in real arithmetic: no complex tensor anywhere, the form a
        device without complex data needs (a NeuronCore: ``neuron``, or ``xla`` on torch-neuronx 2.9).

    Raises
    ------
    ValueError
        ``dims`` is not 1–3, ``modes`` does not match it, an unknown ``backend``, or split weights
        with ``backend="torch"``.
    trnplan.ComplexOnDevice
        At a call, complex weights on a device that holds no complex data (use ``dtype=torch.float32``).

    Examples
    --------
    >>> import torch
    >>> from trnplan.nn import SpectralConv
    >>> layer = SpectralConv(16, 16, modes=(12, 12))
    >>> layer(torch.randn(4, 16, 64, 64)).shape
    torch.Size([4, 16, 64, 64])
    """

    def __init__(self, in_channels: int, out_channels: int, modes: int | Sequence[int], dims: int | None = None,
                 backend: str = "trnplan", dtype: torch.dtype = torch.complex64):
        super().__init__()
        if dims is None:
            dims = 1 if isinstance(modes, int) else len(modes)
        if dims not in (1, 2, 3):
            raise ValueError(f"SpectralConv takes 1, 2 or 3 grid dimensions, got dims={dims}")
        modes = (modes,) * dims if isinstance(modes, int) else tuple(modes)
        if len(modes) != dims or any(not isinstance(m, int) or m < 1 for m in modes):
            raise ValueError(f"modes must be a positive int or {dims} positive ints, got {modes!r}")
        if backend not in ("trnplan", "torch"):
            raise ValueError(f"backend must be 'trnplan' or 'torch', got {backend!r}")
        self.in_channels, self.out_channels, self.modes, self.dims, self.backend = (
            in_channels, out_channels, modes, dims, backend)
        kept = (*(2 * m for m in modes[:-1]), modes[-1])
        scale = 1.0 / (in_channels * out_channels)  # the FNO's initialisation
        if dtype.is_complex:
            self.weight = torch.nn.Parameter(scale * torch.randn(in_channels, out_channels, *kept, dtype=dtype))
        elif dtype in (torch.float32, torch.float64) and backend == "trnplan":
            # the same distribution as the complex weights' (each part of a complex randn has variance 1/2)
            self.weight = torch.nn.Parameter(scale / math.sqrt(2) * torch.randn(in_channels, out_channels, *kept, 2,
                                                                                dtype=dtype))
        else:
            raise ValueError(f"dtype must be complex64/complex128, or float32/float64 for split weights with "
                             f"backend='trnplan'; got {dtype} with backend={backend!r}")

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, modes={self.modes}, backend={self.backend!r}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        grid = tuple(x.shape[-self.dims:])
        dim = tuple(range(-self.dims, 0))
        if self.backend == "torch":
            return self._torch(x, grid, dim)
        if not self.weight.is_complex():
            return self._split(x, grid)
        if x.device.type not in ("cpu", "cuda"):
            _refuse_complex(x.device)
        xh = tfft.rfftn_truncated(x, self.modes, dim=dim)
        return tfft.irfftn_truncated(self._mix(xh), s=grid, modes=self.modes, dim=dim)

    def _split(self, x: torch.Tensor, grid: tuple) -> torch.Tensor:
        """The layer with split weights: the truncated r2c plan's ``execute_split``, the mixing on
        (re, im) in real arithmetic, the truncated c2r plan's ``execute_split`` (each plan
        differentiable through its adjoint plan)."""
        lead = tuple(x.shape[: x.ndim - self.dims])
        batch, out = math.prod(lead), (*lead[:-1], self.out_channels)
        cdtype = torch.complex128 if self.weight.dtype == torch.float64 else torch.complex64
        # under torch.compile on cpu/cuda the plans are opaque operators (Dynamo cannot trace
        # planning): one graph. Elsewhere Dynamo breaks the graph at each plan, which then runs as
        # its own compiled graph: what torch.compile(backend="neuron") does with an unknown
        # operator is not documented (docs/trainium.md), a graph break is
        if torch.compiler.is_compiling() and x.device.type in ("cpu", "cuda"):
            def fwd_split(t):
                return execute_split_op([t], kind_word("r2c", self.modes, None), list(grid), False, "backward")

            def inv_split(pair):
                return execute_split_op(list(pair), kind_word("c2r", self.modes, None), list(grid), True,
                                        "backward")[0]
        else:
            fwd_split = cached_plan("r2c", grid, batch, cdtype, "backward", False, x.device,
                                    modes=self.modes).execute_split
            inv_split = cached_plan("c2r", grid, math.prod(out), cdtype, "backward", True, x.device,
                                    modes=self.modes).execute_split
        xr, xi = (t.reshape(*lead, *t.shape[1:]) for t in fwd_split(x.reshape(batch, *grid)))
        # unbind, not two selects: their eager backward (select_backward) is off the Neuron op lists, unbind's is a stack
        eq, (wr, wi) = _EINSUM[self.dims], self.weight.unbind(-1)
        yr = torch.einsum(eq, xr, wr) - torch.einsum(eq, xi, wi)
        yi = torch.einsum(eq, xr, wi) + torch.einsum(eq, xi, wr)
        kept = yr.shape[yr.ndim - self.dims:]
        y = inv_split((yr.reshape(-1, *kept), yi.reshape(-1, *kept)))
        return y.reshape(*out, *grid)

    def _mix(self, xh: torch.Tensor) -> torch.Tensor:
        """The per-frequency channel mixing ``Σ_i X[b, i, k] W[i, o, k]``.

        On cpu and cuda one complex einsum. Elsewhere in real arithmetic: on torch-xla 2.9 (XLA:CPU)
        the backward of a complex64 einsum gave the weights' gradient 1.47 off in relative L2
        (measured here against the CPU's), while four real einsums give it to 7.6e-8; and
        ``torch.complex`` has no XLA lowering (it runs on the host), so the parts are packed by
        arithmetic, which is exact.
        """
        eq, w = _EINSUM[self.dims], self.weight
        if xh.device.type in ("cpu", "cuda"):
            return torch.einsum(eq, xh, w)
        xr, xi, wr, wi = xh.real, xh.imag, w.real, w.imag
        yr = torch.einsum(eq, xr, wr) - torch.einsum(eq, xi, wi)
        yi = torch.einsum(eq, xr, wi) + torch.einsum(eq, xi, wr)
        return yr.to(xh.dtype) + yi.to(xh.dtype) * 1j

    def _torch(self, x, grid, dim):
        """rfftn, the kept block cut out, mixed, zero-filled back, irfftn: with torch.fft."""
        xh = torch.fft.rfftn(x, dim=dim)
        for axis, m in enumerate(self.modes[:-1]):
            d = x.ndim - self.dims + axis
            xh = torch.cat([xh.narrow(d, 0, m), xh.narrow(d, grid[axis] - m, m)], d)
        yh = torch.einsum(_EINSUM[self.dims], xh[..., : self.modes[-1]], self.weight)
        yh = torch.nn.functional.pad(yh, (0, grid[-1] // 2 + 1 - self.modes[-1]))
        for axis, m in enumerate(self.modes[:-1]):
            d = yh.ndim - self.dims + axis
            zeros = yh.new_zeros(*yh.shape[:d], grid[axis] - 2 * m, *yh.shape[d + 1:])
            yh = torch.cat([yh.narrow(d, 0, m), zeros, yh.narrow(d, m, m)], d)
        return torch.fft.irfftn(yh, s=grid, dim=dim)
