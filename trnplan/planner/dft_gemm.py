"""dft-gemm: the whole DFT as one fused real GEMM, ``[xr | xi] @ [[C, S], [-S, C]]``.

The direct O(n²) DFT is what a matrix engine does best for small n: one matmul, no data
movement between stages. Four separate real GEMMs are 2–3× slower than the fused one on the
CPU here (../shared/FACTS.md), so the complex matrix is laid out as one 2n×2n real matrix.

Limits, both enforced here:

* accuracy — each output is an n-term dot product, error O(u·√n) (FACTS: fp32 1.5e-7 at
  n=64 → 3.4e-7 at n=1024); the planner rejects sizes whose prediction exceeds the bound.
* memory — the matrix holds 4n² values; it is capped at ``MAX_MATRIX_BYTES``.
"""

from __future__ import annotations

import torch

from trnplan.kernels import dft_matrix, fused_complex_matrix
from trnplan.planner.accuracy import UNIT_ROUNDOFF, sqrt_growth
from trnplan.planner.cost import Work, copy
from trnplan.planner.solver import Solver, itemsize

#: the 2n×2n matrix may take at most this much memory (fp32: n ≤ 2048; fp64: n ≤ 1448)
MAX_MATRIX_BYTES = 64 * 2**20
#: error model u·(a + b·√n) per precision: a covers the rounding of the matrix entries (fp64 at
#: n=3 measured 2.9u), b the dot-product growth. The worst case is a small batch: MKL's sgemm
#: takes a sequential-sum path for 1–3 rows and measured 13.5u at n=1024 (0.42·√n), where 4+
#: rows measured 4.2u; fp64 measured 13.8u at n=1024 (bench/accuracy.py, tests/test_solvers.py).
#: In fp32 this puts n ≥ 1100 over the 1e-6 bound, so the planner keeps dft-gemm below that.
ERROR_AB = {"fp32": (2.5, 0.42), "fp64": (3.0, 0.6)}


class DFTGemm(torch.nn.Module):
    """``y = [xr | xi] @ W`` with ``W = [[Re F, Im F], [-Im F, Re F]]``."""

    def __init__(self, n: int, w: torch.Tensor):
        super().__init__()
        self.n = n
        self.register_buffer("w", w)

    def forward(self, re, im):
        y = torch.mm(torch.cat([re, im], dim=-1), self.w)
        return y[:, : self.n], y[:, self.n :]


class DFTGemmSolver(Solver):
    name = "dft-gemm"

    def why_not(self, problem, planner, forced):
        matrix = 4 * problem.n**2 * itemsize(problem)
        if matrix > MAX_MATRIX_BYTES:
            return (
                f"n={problem.n} needs a {matrix / 2**20:.0f} MiB DFT matrix, over the "
                f"{MAX_MATRIX_BYTES // 2**20} MiB cap"
            )
        return None

    def plan(self, problem, planner, spec):
        if self.check_size(problem, spec):
            return None
        n, b, size = problem.n, problem.batch, itemsize(problem)
        work = copy(2 * n * b, size) + Work(  # cat [re | im]
            launches=1,
            gemm_flops=2.0 * (2 * n) * (2 * n) * b,
            bytes=(4 * n * n + 4 * n * b) * size,
        )
        a, b_ = ERROR_AB[problem.precision]
        error = UNIT_ROUNDOFF[problem.precision] * (a + b_ * sqrt_growth(n))
        return self.node(problem, planner, work, error)

    def build(self, node, ctx):
        w = fused_complex_matrix(dft_matrix(node.n, 1 if node.inverse else -1), left=False)
        return DFTGemm(node.n, ctx.const(w))
