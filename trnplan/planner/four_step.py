"""four-step: Bailey's four-step FFT for composite n = n1·n2 (Bailey 1990; "Monarch" in ML).

With input index j = n2·j1 + j2 and output index k = k1 + n1·k2:

    X[k1 + n1·k2] = Σ_j2 ω_n2^{j2·k2} · ω_n^{j2·k1} · Σ_j1 ω_n1^{j1·k1} · x[n2·j1 + j2]

1. n2·B column transforms of length n1 (child 1),
2. the twiddle ω_n^{j2·k1},
3. n1·B row transforms of length n2 (child 2),
4. a transpose into natural order.

Both children are planned through the planner, so each may itself be a four-step, a GEMM, a
Stockham or a native leaf: on a matrix engine every level is a batched GEMM.

Where both children are one-GEMM dft-gemm leaves (the Monarch tree a matrix engine runs), the
node lowers to :class:`MonarchGemm` instead: two GEMMs on the interleaved layout with three data
movements (in, twiddle-and-reorder, out), where the general lowering makes three transposes of re
and im each, the twiddle product, and its children's interleaving copies. The split is
chosen by the cost model among a few candidate splits (:func:`candidate_splits`): trying every
divisor pair made planning take seconds for highly composite n (720720 has 240 divisors), and
the balanced, smallest-prime and GEMM-sized splits are the ones that ever win.
"""

from __future__ import annotations

import math

import torch

from trnplan.core.accuracy import UNIT_ROUNDOFF, combine
from trnplan.core.cost import cmul_work, transpose
from trnplan.kernels import cmul, dft_matrix, fused_complex_matrix, twiddle_table
from trnplan.kernels.complex import interleave_order, interleaved, planes
from trnplan.kernels.gemm import Gemm
from trnplan.planner.dft_gemm import chunking
from trnplan.planner.solver import (
    Solver,
    best_variant,
    divisors,
    itemsize,
    prime_factors,
)

#: twiddle rounding added to the children's errors: c·u (fitted, docs/precision.md)
ERROR_C = 2.0


#: leaf lengths a matrix engine takes as one GEMM (the Monarch choice: 16–128 points)
GEMM_LEAVES = (16, 32, 64, 128)


def candidate_splits(n: int) -> list[tuple[int, int]]:
    """The (n1, n2) splits four-step tries: at most ~12, both orientations of each.

    * the two divisors closest to √n on either side (balanced: the fewest levels);
    * the smallest prime factor p (Cooley–Tukey radix-p: one small GEMM level);
    * the GEMM-sized leaves 16…128 that divide n.
    """
    small = [d for d in divisors(n) if 1 < d <= math.isqrt(n)]
    if not small:
        return []
    chosen = set(small[-2:]) | {small[0]} | {d for d in GEMM_LEAVES if n % d == 0 and d < n}
    return sorted({s for d in chosen for s in ((d, n // d), (n // d, d))})


class FourStepFFT(torch.nn.Module):
    def __init__(self, n1: int, n2: int, first, second, sign: int, ctx):
        super().__init__()
        self.n1, self.n2 = n1, n2
        self.first, self.second = first, second
        tr, ti = ctx.split_const(twiddle_table(n2, n1, n1 * n2, sign))  # T[j2, k1]
        self.register_buffer("tr", tr)
        self.register_buffer("ti", ti)

    def forward(self, re, im):
        M, n1, n2 = re.shape[0], self.n1, self.n2
        ar = re.reshape(M, n1, n2).transpose(1, 2).reshape(M * n2, n1)
        ai = im.reshape(M, n1, n2).transpose(1, 2).reshape(M * n2, n1)
        ar, ai = self.first(ar, ai)  # A[j2, k1]
        br, bi = cmul(ar.reshape(M, n2, n1), ai.reshape(M, n2, n1), self.tr, self.ti)
        br = br.transpose(1, 2).reshape(M * n1, n2)
        bi = bi.transpose(1, 2).reshape(M * n1, n2)
        cr, ci = self.second(br, bi)  # C[k1, k2]
        yr = cr.reshape(M, n1, n2).transpose(1, 2).reshape(M, n1 * n2)
        yi = ci.reshape(M, n1, n2).transpose(1, 2).reshape(M, n1 * n2)
        return yr, yi


class MonarchGemm(torch.nn.Module):
    """The four-step of two dft-gemm leaves as two plain GEMMs on the interleaved layout.

    Input index ``j = n2·j1 + j2``, output index ``k = k1 + n1·k2``; each row of the batch is
    held interleaved (re, im adjacent: a complex64 tensor's own memory), and every data movement
    permutes axes *within* a row (2n values) only, never across the batch:

    1. ``(m, j1, j2, c) → (m, j2, c, j1)``, then one GEMM ``(M·n2 × 2n1) @ (2n1 × 2n1)``: the
       length-n1 DFTs, written as ``(m, j2, k1, c)``;
    2. the twiddle ``ω_n^{j2·k1}`` and ``(m, j2, k1, c) → (m, k1, j2, c)`` (one pass: one fused
       kernel in a compiled graph, with the next GEMM's bf16 slicing), then one GEMM
       ``(M·n1 × 2n2) @ (2n2 × 2n2)``: the length-n2 DFTs, written as ``(m, k1, k2, c)``;
    3. ``(m, k1, k2, c) → (m, k2, k1, c)``: natural order, interleaved — the complex64 result's
       memory, which the plan returns without packing (:func:`~trnplan.kernels.complex.pack`).

    Why not batch-last with the twiddle folded into batched GEMM matrices (the first version of
    this class, which needed no transposes between the GEMMs): its entry and exit move the batch
    axis, a transpose across the whole array, and on an H100 the Inductor kernel that fused that
    entry with bf16x3's slicing ran at 0.3 TB/s (891 µs for 2^24 points, 1.6× the whole plan
    before it; docs/gpu.md). Transposes within a row stay in cache; the twiddle costs nothing
    extra where it fuses into the pass that reorders and slices the second GEMM's operand.
    """

    def __init__(self, n1: int, n2: int, sign: int, ctx):
        super().__init__()
        self.n1, self.n2 = n1, n2
        o1, o2 = interleave_order(n1), interleave_order(n2)
        # rows: (c, j1) split order (the entry writes it); columns: (k1, c) interleaved
        self.first = Gemm(fused_complex_matrix(dft_matrix(n1, sign), left=False)[:, o1], ctx)
        # rows and columns interleaved: (j2, c) in, (k2, c) out
        self.second = Gemm(fused_complex_matrix(dft_matrix(n2, sign), left=False)[o2][:, o2], ctx)
        tr, ti = ctx.split_const(twiddle_table(n2, n1, n1 * n2, sign))  # T[j2, k1]
        self.register_buffer("tr", tr)
        self.register_buffer("ti", ti)

    def forward(self, re, im):
        M, n1, n2 = re.shape[0], self.n1, self.n2
        x = interleaved(re, im).view(M, n1, n2, 2)  # free for a complex input
        a = self.first(x.permute(0, 2, 3, 1).reshape(M * n2, 2 * n1))  # (m, j2) × (k1, c)
        ar, ai = planes(a)
        br, bi = cmul(ar.view(M, n2, n1), ai.view(M, n2, n1), self.tr, self.ti)
        b = torch.stack([br.transpose(1, 2), bi.transpose(1, 2)], dim=-1)  # (m, k1, j2, c)
        y = self.second(b.view(M * n1, 2 * n2))  # (m, k1) × (k2, c)
        return planes(y.view(M, n1, n2, 2).transpose(1, 2).reshape(M, 2 * n1 * n2))


def monarch_leaves(node, ctx) -> bool:
    """Whether a four-step node lowers to :class:`MonarchGemm`: both children dft-gemm leaves whose
    contraction is one GEMM (a chunked leaf keeps its chunks, for fp32's bar: the general lowering)."""
    return all(c.solver == "dft-gemm" and chunking(c.n, ctx.precision)[0] == 1 for c in node.children)


class FourStep(Solver):
    name = "four-step"
    composite = True
    takes_factors = True

    def why_not_factors(self, problem, factors):
        if len(factors) != 2 or 1 in factors:
            return f"four-step takes two factors n1xn2, both > 1; got {'x'.join(map(str, factors))}"
        return super().why_not_factors(problem, factors)

    def why_not(self, problem, planner, forced):
        if len(prime_factors(problem.n)) < 2:
            return f"n={problem.n} is not composite (1 or prime)"
        return None

    def plan(self, problem, planner, spec):
        n = problem.n
        if spec is not None and spec.factors:
            splits = [tuple(spec.factors)]
        else:
            splits = candidate_splits(n)
        return best_variant(lambda split: self._plan_split(problem, planner, spec, *split), splits,
                            tol=planner.tol(problem))

    def _plan_split(self, problem, planner, spec, n1, n2):
        b, size = problem.batch, itemsize(problem)
        sub1 = problem.unscaled(n1, n2 * b, problem.inverse), spec.child(0) if spec else None
        sub2 = problem.unscaled(n2, n1 * b, problem.inverse), spec.child(1) if spec else None
        first, second = planner.plan(*sub1), planner.plan(*sub2)
        n = n1 * n2
        # 3 transposes of re and im (6 launches, each with a reshape), one twiddle product
        work = transpose(6 * n * b, size, run=1, launches=12) + cmul_work(n * b, size)
        twiddle = ERROR_C * UNIT_ROUNDOFF[problem.precision]
        error = combine(first.error, second.error, twiddle)
        tol = planner.tol(problem)
        if error > tol > twiddle:
            # each child was the cheapest within the whole bound, and together they exceed it:
            # plan both again to an equal share of it (in bf16x3 a child at 8e-6 is within 1e-5
            # alone, two of them are 1.1e-5: a share of 7e-6 each picks fewer GEMM stages)
            share = math.sqrt((tol * tol - twiddle * twiddle) / 2)
            tighter = planner.plan_share(*sub1, share), planner.plan_share(*sub2, share)
            if None not in tighter:
                first, second = tighter
                error = combine(first.error, second.error, twiddle)
        return self.node(problem, planner, work, error, params={"factors": (n1, n2)}, children=(first, second))

    def build(self, node, ctx):
        n1, n2 = node.param("factors")
        if monarch_leaves(node, ctx):
            return MonarchGemm(n1, n2, 1 if node.inverse else -1, ctx)
        return FourStepFFT(n1, n2, ctx.build(node.children[0]), ctx.build(node.children[1]),
                           1 if node.inverse else -1, ctx)
