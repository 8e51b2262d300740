"""stockham: self-sorting (autosort) FFT for n = 2^a, radix 8/4/2 mixed with the fewest stages.

Stockham's formulation (Cochran et al. 1967; Van Loan, *Computational Frameworks for the FFT*,
1992, §1.7) needs no bit reversal: each stage reads the previous stage's output in one order
and writes it in another. After a stage with radix ``r`` the state ``Y[k, j]`` (shape L×m, with
L·m = n) holds length-L DFTs of the subsequences ``x[j + m·t]``; the next stage is

    Y'[k + L·p, j'] = Σ_q F_r[p, q] · (ω_{Lr}^{q·k} · Y[k, q·m' + j'])

i.e. a twiddle multiply followed by one radix-r DFT applied to every (k, j', batch) column at
once. Keeping the batch as the *last* axis makes every stage a single ``(2r × 2r) @ (2r × n·B/r)``
real GEMM (the fused split-complex DFT_r matrix), which is the shape a matrix engine wants.

Radices: as many 8s as possible (fewest stages), a remainder of 2^2 taken as one radix-4, a
remainder of 2^1 folded as 8·2 → 4·4 (balanced stages, as pocketfft prefers 4s to 2s).
"""

from __future__ import annotations

import math

import torch

from trnplan.core.accuracy import (
    SMALL_SAMPLE,
    UNIT_ROUNDOFF,
    combine,
    gemm_error,
    log_growth,
    storage,
)
from trnplan.core.cost import Work, cmul_work, gemm_work, transpose
from trnplan.kernels import cmul, dft_matrix, fused_complex_matrix, twiddle_table
from trnplan.kernels.gemm import Gemm
from trnplan.planner.solver import Solver, is_power_of_two, itemsize

#: error constant c of c·u·√log2(n): measured ratios reached 0.74 (fp32) and 1.94 (fp64, still
#: growing slowly with n) in bench/accuracy.py; rounded up
ERROR_C = {"fp32": 1.0, "fp64": 2.5}
RADICES = (8, 4, 2)


def default_radices(n: int) -> tuple[int, ...]:
    """Fewest radix-8/4/2 stages for n = 2^a (e.g. 4096 → 8·8·8·8, 1024 → 8·8·4·4, 2 → 2)."""
    a = int(math.log2(n))
    radices = [8] * (a // 3)
    if a % 3 == 2:
        radices.append(4)
    elif a % 3 == 1:
        if radices:
            radices[-1] = 4
            radices.append(4)
        else:
            radices.append(2)
    return tuple(radices)


class StockhamFFT(torch.nn.Module):
    """Stockham autosort FFT on split tensors; batch kept last so each stage is one GEMM."""

    def __init__(self, n: int, radices, sign: int, ctx):
        super().__init__()
        self.n, self.radices = n, tuple(radices)
        L = 1
        for i, r in enumerate(self.radices):
            setattr(self, f"f{i}", Gemm(fused_complex_matrix(dft_matrix(r, sign), left=True), ctx, side="left"))
            if L > 1:
                tr, ti = ctx.split_const(twiddle_table(L, r, L * r, sign))
                self.register_buffer(f"tr{i}", tr[:, :, None])
                self.register_buffer(f"ti{i}", ti[:, :, None])
            L *= r

    def forward(self, re, im):
        if not self.radices:
            return re, im
        M, n = re.shape[0], self.n
        x = torch.stack([re.t(), im.t()])  # (2, n, M): batch last
        L = 1
        for i, r in enumerate(self.radices):
            K = (n // (L * r)) * M
            y = x.view(2, L, r, K)  # [c, k, q, (j', batch)]
            if L > 1:
                zr, zi = cmul(y[0], y[1], getattr(self, f"tr{i}"), getattr(self, f"ti{i}"))
                z = torch.stack([zr.transpose(0, 1), zi.transpose(0, 1)])  # (2, r, L, K)
            else:
                z = y
            x = getattr(self, f"f{i}")(z.reshape(2 * r, L * K))  # [(c, p), (k, j', batch)]
            L *= r
        x = x.view(2, n, M)
        return x[0].t(), x[1].t()


class Stockham(Solver):
    name = "stockham"
    takes_factors = True
    #: 2: the error bound widened for transforms of few points (accuracy.SMALL_SAMPLE)
    version = 2

    def why_not_factors(self, problem, factors):
        bad = [r for r in factors if r not in RADICES]
        if bad:
            return f"stockham radices must be 8, 4 or 2; got {'x'.join(map(str, factors))}"
        return super().why_not_factors(problem, factors)

    def why_not(self, problem, planner, forced):
        if not is_power_of_two(problem.n):
            return f"n={problem.n} is not a power of two"
        return None

    def plan(self, problem, planner, spec):
        n, b, size = problem.n, problem.batch, itemsize(problem)
        radices = spec.factors if spec is not None and spec.factors else default_radices(n) if n > 1 else ()
        # entry: (re, im) of (B, n) stacked batch-last — a transpose unless B = 1; exit: views
        work = transpose(2 * n * b, size, run=1 if b > 1 else n, launches=4) if radices else Work()
        twiddle = cmul_work(n * b, size) if len(radices) > 1 else None  # the same at every stage after the first
        stages: dict = {}  # radix -> its GEMM stage's work (radices repeat: 4096 is 8·8·8·8)
        L = 1
        for i, r in enumerate(radices):
            if i > 0:  # twiddle, then the (k, q) → (q, k) permuting stack: runs of (n/(L·r))·B
                work += twiddle + transpose(2 * n * b, size, run=n // (L * r) * b, launches=4)
            stage = stages.get(r)
            if stage is None:  # one (2r × 2r) @ (2r × n·b/r) GEMM: reads its operand, writes its result
                stage = stages[r] = Work(launches=2, bytes=4 * n * b * size) + gemm_work(
                    problem.precision, planner.profile, 8.0 * r * n * b, 2 * n * b, size,
                    shape=(2 * r, 2 * r, n * b / r))
            work += stage
            L *= r
        error = ERROR_C[storage(problem.precision)] * UNIT_ROUNDOFF[problem.precision] * log_growth(n)
        # a transform of few points is a noisy sample of the random-input error (as a library leaf's,
        # accuracy.SMALL_SAMPLE): fp32 2 × batch 4, inverse, measured 1.01 u on an Intel Xeon host
        # (bench/accuracy.py, 2026-11-27), where the model gave u
        error *= 1.0 + SMALL_SAMPLE / math.sqrt(n * b)
        # each radix stage is one GEMM: in the reduced modes its operands are rounded or split
        error = combine(error, gemm_error(problem.precision, len(radices), planner.probe, n * b, kind="radix"))
        return self.node(problem, planner, work, error, params={"factors": radices} if radices else {})

    def build(self, node, ctx):
        return StockhamFFT(node.n, node.param("factors", ()), 1 if node.inverse else -1, ctx)
