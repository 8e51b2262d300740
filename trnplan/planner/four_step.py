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
node lowers to :class:`MonarchGemm` instead: two GEMMs on one batch-last layout, the twiddle folded
into the second GEMM's matrices, and two data movements (in and out) where the general lowering
makes seven (three transposes of re and im each, the twiddle product) plus its children's copies. The split is
chosen by the cost model among a few candidate splits (:func:`candidate_splits`): trying every
divisor pair made planning take seconds for highly composite n (720720 has 240 divisors), and
the balanced, smallest-prime and GEMM-sized splits are the ones that ever win.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from trnplan.core.accuracy import UNIT_ROUNDOFF, combine
from trnplan.core.cost import PRODUCTS, Work, cmul_work, copy, transpose
from trnplan.kernels import cmul, dft_matrix, fused_complex_matrix, twiddle_table
from trnplan.kernels.complex import interleave_order, planes
from trnplan.kernels.gemm import Gemm
from trnplan.planner.dft_gemm import node_chunking
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
    """The general four-step: the first child's DFTs, the twiddle product, the second child's.
    ``scale`` (the plan's norm, :meth:`FourStep.build_scaled`) rides in the twiddles (float64,
    before the cast): the product that applies them applies it, with no pass of its own."""

    def __init__(self, n1: int, n2: int, first, second, sign: int, ctx, scale: float = 1.0):
        super().__init__()
        self.n1, self.n2 = n1, n2
        self.first, self.second = first, second
        tr, ti = ctx.split_const(twiddle_table(n2, n1, n1 * n2, sign) * scale)  # T[j2, k1]
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


#: the twiddle-folded second-stage matrices (n1 of 2n2 × 2n2 reals, times the split modes' product
#: count) may take at most this much memory; past it the general lowering runs (fp32: n1·n2² ≤ 2^20)
MAX_FOLDED_BYTES = 16 * 2**20


class MonarchGemm(torch.nn.Module):
    """The four-step of two dft-gemm leaves as two GEMMs on one batch-last layout.

    The data is held as ``(c, j1, j2, m)`` — re/im plane, input index ``j = n2·j1 + j2``, batch
    last — so that every step is a GEMM on the matrix engine's natural shape, with no transpose
    between them (the axes cycle through the GEMMs' row index instead):

    1. one GEMM ``F1 (2n1 × 2n1) @ X (2n1 × n2·M)``: the length-n1 DFTs of every (j2, m) column,
       its rows ordered ``(k1, c)`` so that each k1 holds a ``(c, j2) × m`` block;
    2. one batched GEMM over k1 with the twiddle folded into the matrices,
       ``G[k1] = F2 · diag(ω_n^{j2·k1})`` (built in float64, rounded once): ``(c, k2) × m`` per k1;
    3. one copy into natural order ``k = k1 + n1·k2``, interleaved — the complex64 result's own
       memory, which the plan then returns without packing (:func:`~trnplan.kernels.complex.pack`).

    The entry (a batch-last stack of the two planes) and the exit are the only data movements;
    in a compiled graph each fuses with the split modes' slicing of the GEMM operand next to it.

    Measured on an H100 (docs/gpu.md, 2^24 points, n = 4096): eager bf16 0.88 ms against 1.46 ms
    for the general lowering, bf16x3 1.72 against 2.24, fp32 1.08 against 1.63-2.26. A layout with
    transposes only within rows (tried) was slower eagerly (bf16 1.31 ms). Under Inductor the
    entry is the weak point: fused with bf16x3's slicing into one transposing kernel it ran at
    0.3 TB/s (891 µs), and the compiled bf16x3 plan (1.59 ms) is slower than the compiled general
    lowering (1.01-1.05 ms), whose transposes Inductor keeps apart from the slicing.
    """

    def __init__(self, n1: int, n2: int, sign: int, ctx, scale: float = 1.0):
        super().__init__()
        self.n1, self.n2 = n1, n2
        order = interleave_order(n1)  # rows (c, k1) -> (k1, c)
        # in bf16 mode the first GEMM's output is the second's operand, used rounded to bf16 only:
        # where the device multiplies bf16 tensors it is written as bf16 (no cast pass between)
        self.first = Gemm(fused_complex_matrix(dft_matrix(n1, sign), left=True)[order], ctx, side="left",
                          rounded_output=True)
        twiddle = twiddle_table(n2, n1, n1 * n2, sign)  # T[j2, k1]
        # G[k1][k2, j2] = F2[k2, j2]·T[j2, k1], times the plan's norm scale where it is folded here
        folded = dft_matrix(n2, sign)[None, :, :] * (twiddle.T[:, None, :] * scale)
        self.second = Gemm(np.stack([fused_complex_matrix(g, left=True) for g in folded]), ctx, side="left")

    @staticmethod
    def folded_bytes(n1: int, n2: int, itemsize: int, products: int) -> int:
        return n1 * (2 * n2) ** 2 * itemsize * products

    def forward(self, re, im):
        M, n1, n2 = re.shape[0], self.n1, self.n2
        # (c, j1, j2, m): one copy of the two planes, batch last
        x = torch.stack([re.reshape(M, n1, n2).permute(1, 2, 0), im.reshape(M, n1, n2).permute(1, 2, 0)])
        a = self.first(x.view(2 * n1, n2 * M))  # rows (k1, c), columns (j2, m)
        b = self.second(a.view(n1, 2 * n2, M))  # (k1, (c, k2), m)
        y = b.view(n1, 2, n2, M).permute(3, 2, 0, 1).reshape(M, 2 * n1 * n2)  # (m, k2, k1, c): natural, interleaved
        return planes(y)


def monarch_leaves(node, ctx) -> bool:
    """Whether a four-step node lowers to :class:`MonarchGemm`: both children one-GEMM dft-gemm
    leaves (no chunked contraction), and the folded matrices no larger than the data they
    transform. The n1 folded 2n2 × 2n2 matrices are read on every call: at n = 4096 = 64×64 that
    is 4 MiB (fp32), 1/32 of the data at batch 4096 but 32× the data at batch 4, where the
    general lowering's one twiddle table moves far less (measured on the lowered graph: 5.3 MB
    against 2.4 MB, tests/test_trainium_cost.py)."""
    return monarch_fits(node.param("factors"), node.children, node.n * node.batch, ctx.precision,
                        ctx.dtype.itemsize)


def monarch_fits(factors, children, points: int, precision: str, size: int) -> bool:
    """:func:`monarch_leaves` from a node's parts (the planner prices the lowering it will get)."""
    n1, n2 = factors
    if any(c.solver != "dft-gemm" or node_chunking(c, precision)[0] != 1 for c in children):
        return False
    products = max(1, len(PRODUCTS.get(precision, ())))
    return MonarchGemm.folded_bytes(n1, n2, size, products) <= min(MAX_FOLDED_BYTES, 2 * points * size)


def monarch_work(n1: int, n2: int, b: int, size: int, precision: str) -> Work:
    """:class:`MonarchGemm`'s own work beside its two dft-gemm children's: the entry (a batch-last
    stack of the two planes) and the exit (the copy into natural, interleaved order), both
    transposing; the n1 folded matrices of the second GEMM, read where its child prices one; and
    less the children's own interleaving copies of their ``(re, im)`` pairs, which its one
    buffer makes unnecessary (the GEMMs read and write it where it lies)."""
    n = n1 * n2
    folded = (n1 - 1) * (2 * n2) ** 2 * size * max(1, len(PRODUCTS.get(precision, ())))
    return (transpose(2 * n * b, size, run=1) * 2 + Work(bytes=folded)
            + copy(2 * n * b, size) * -2.0)


class _Splits:
    """What every split n1×n2 of one four-step problem shares, derived once per :meth:`FourStep.plan`
    (a 4096-point search tries 56 splits over its sub-problems): the child problem of each factor
    ``d`` (``d`` points, batch ``n/d·b``: the factor is n1 of one split and n2 of another), the
    bound, and the general lowering's own work, which depends on n and b alone."""

    def __init__(self, problem, planner):
        self.problem, self.planner = problem, planner
        self.tol = planner.tol(problem)
        self._subs: dict = {}
        self._glue = None

    def sub(self, d: int):
        """The child problem of factor ``d``: ``n/d·b`` transforms of length ``d``, scale 1."""
        got = self._subs.get(d)
        if got is None:
            problem = self.problem
            got = self._subs[d] = problem.unscaled(d, problem.n // d * problem.batch, problem.inverse)
        return got

    def glue(self) -> Work:
        """The general lowering's work beside its children: 3 transposes of re and im (6 launches,
        each with a reshape), one twiddle product."""
        if self._glue is None:
            n, b, size = self.problem.n, self.problem.batch, itemsize(self.problem)
            self._glue = transpose(6 * n * b, size, run=1, launches=12) + cmul_work(n * b, size)
        return self._glue


class FourStep(Solver):
    name = "four-step"
    #: 2: a node that lowers to MonarchGemm is priced as that lowering (it was priced as the general one)
    version = 2
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
        return best_variant(functools.partial(self._plan_split, _Splits(problem, planner), spec), splits,
                            tol=planner.tol(problem))

    def _plan_split(self, splits: _Splits, spec, split):
        problem, planner = splits.problem, splits.planner
        n1, n2 = split
        b, size = problem.batch, itemsize(problem)
        sub1 = splits.sub(n1), spec.child(0) if spec else None
        sub2 = splits.sub(n2), spec.child(1) if spec else None
        first, second = planner.plan(*sub1), planner.plan(*sub2)
        n = n1 * n2
        twiddle = ERROR_C * UNIT_ROUNDOFF[problem.precision]
        error = combine(first.error, second.error, twiddle)
        tol = splits.tol
        if error > tol > twiddle:
            # each child was the cheapest within the whole bound, and together they exceed it:
            # plan both again to an equal share of it (in bf16x3 a child at 8e-6 is within 1e-5
            # alone, two of them are 1.1e-5: a share of 7e-6 each picks fewer GEMM stages)
            share = math.sqrt((tol * tol - twiddle * twiddle) / 2)
            tighter = planner.plan_share(*sub1, share), planner.plan_share(*sub2, share)
            if None not in tighter:
                first, second = tighter
                error = combine(first.error, second.error, twiddle)
        if monarch_fits((n1, n2), (first, second), n * b, problem.precision, size):
            work = monarch_work(n1, n2, b, size, problem.precision)
        else:
            work = splits.glue()
        return self.node(problem, planner, work, error, params={"factors": (n1, n2)}, children=(first, second))

    def build(self, node, ctx):
        return self.build_scaled(node, ctx, 1.0)

    def scale_folds(self, node):
        return True

    def build_scaled(self, node, ctx, scale):
        """The scale rides in the twiddles (the general lowering) or in the twiddle-folded second
        GEMM's matrices (Monarch): both already exist, so it costs no pass."""
        n1, n2 = node.param("factors")
        if monarch_leaves(node, ctx):
            return MonarchGemm(n1, n2, 1 if node.inverse else -1, ctx, scale)
        return FourStepFFT(n1, n2, ctx.build(node.children[0]), ctx.build(node.children[1]),
                           1 if node.inverse else -1, ctx, scale)
