"""butterfly: the textbook iterative radix-2 decimation-in-time FFT (Cooley & Tukey 1965).

Bit-reverse the input once, then log2(n) stages of elementwise butterflies
``(a, b) → (a + ω·b, a − ω·b)`` over all blocks and the whole batch at once. It is the simplest
correct FFT and the reference the other power-of-two solvers are checked against; it is rarely
the fastest (log2 n stages of elementwise work, no GEMM).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from trnplan.core.accuracy import UNIT_ROUNDOFF, log_growth, storage
from trnplan.core.cost import cmul_work, copy, elementwise
from trnplan.kernels import cmul, twiddle_table
from trnplan.planner.solver import Solver, is_power_of_two, itemsize

#: error constant c of c·u·√log2(n): measured ratios reached 0.67 (fp32) and 1.50 (fp64) in
#: bench/accuracy.py; rounded up
ERROR_C = {"fp32": 1.0, "fp64": 2.0}


def bit_reversal(n: int) -> np.ndarray:
    bits = int(math.log2(n))
    idx = np.arange(n)
    rev = np.zeros(n, dtype=np.int64)
    for b in range(bits):
        rev |= ((idx >> b) & 1) << (bits - 1 - b)
    return rev


class ButterflyFFT(torch.nn.Module):
    def __init__(self, n: int, sign: int, ctx):
        super().__init__()
        self.n = n
        # int32: an int64 index would put s64 tensors on an accelerator (INT64 becomes INT32 on a
        # NeuronCore, data-types.rst; the xla lane's HLO audit checks it); index_select takes both
        self.register_buffer("perm", torch.as_tensor(bit_reversal(n), dtype=torch.int32).to(ctx.device))
        self.stages = int(math.log2(n))
        for s in range(1, self.stages):  # stage 0 (h = 1) has the trivial twiddle ω = 1
            h = 1 << s
            wr, wi = ctx.split_const(twiddle_table(2, h, 2 * h, sign)[1])  # ω_2h^j, j < h
            self.register_buffer(f"wr{s}", wr)
            self.register_buffer(f"wi{s}", wi)

    def forward(self, re, im):
        M, n = re.shape[0], self.n
        xr, xi = re.index_select(-1, self.perm), im.index_select(-1, self.perm)
        for s in range(self.stages):
            h = 1 << s
            yr, yi = xr.view(M, n // (2 * h), 2, h), xi.view(M, n // (2 * h), 2, h)
            ar, ai, br, bi = yr[:, :, 0], yi[:, :, 0], yr[:, :, 1], yi[:, :, 1]
            if s:
                br, bi = cmul(br, bi, getattr(self, f"wr{s}"), getattr(self, f"wi{s}"))
            xr = torch.stack([ar + br, ar - br], dim=2).view(M, n)
            xi = torch.stack([ai + bi, ai - bi], dim=2).view(M, n)
        return xr, xi


class Butterfly(Solver):
    name = "butterfly"
    # the reduced modes round or split matrix-engine operands only; butterfly's work is all
    # elementwise, which runs in fp32 in every mode: in bf16/tf32 it would be an fp32 plan
    # under another name (plan precision='fp32', or 'auto', to have it considered)
    precisions = ("fp32", "fp64")
    precision_refusal = ("butterfly has no GEMM for precision {precision!r} to apply to (its stages are "
                         "elementwise, fp32); use precision='fp32' or 'auto'")

    def why_not(self, problem, planner, forced):
        if not is_power_of_two(problem.n):
            return f"n={problem.n} is not a power of two"
        return None

    def plan(self, problem, planner, spec):
        n, b, size = problem.n, problem.batch, itemsize(problem)
        stages = int(math.log2(n))
        work = copy(2 * n * b, size, launches=2)  # bit reversal
        if stages:
            # every stage: the sums and differences of the pairs (4 arrays in, 4 out when fused) and a
            # copy; every stage after the first multiplies by its twiddles first. Priced as stage × count
            # (the terms are whole numbers, so the products equal the sums stage by stage exactly)
            work += (elementwise(4, n * b / 2, size, arrays=8) + copy(2 * n * b, size, launches=2)) * stages
            if stages > 1:
                work += cmul_work(n * b / 2, size) * (stages - 1)
        error = ERROR_C[storage(problem.precision)] * UNIT_ROUNDOFF[problem.precision] * log_growth(n)
        return self.node(problem, planner, work, error)

    def build(self, node, ctx):
        return ButterflyFFT(node.n, 1 if node.inverse else -1, ctx)
