"""Complex arithmetic on split (re, im) real tensors."""

from __future__ import annotations

import numpy as np
import torch


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
