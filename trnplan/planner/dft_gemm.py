"""dft-gemm: the whole DFT as one fused real GEMM, ``[xr | xi] @ [[C, S], [-S, C]]``.

The direct O(n²) DFT is what a matrix engine does best for small n: one matmul, no data
movement between stages. Four separate real GEMMs are 2–3× slower than the fused one on the
CPU here (../shared/FACTS.md), so the complex matrix is laid out as one 2n×2n real matrix.

Accuracy: each output is a 2n-term dot product. Summed in one fp32 GEMM its error depends on
the BLAS kernel: MKL's sgemm sums 1–3 rows sequentially and measured 8.2e-7 at n=1024 (13.5u),
4+ rows 2.5e-7 — so a forward and inverse pass together missed the 1e-6 round-trip bar. The
contraction is therefore split into k chunks of at most ``CHUNK`` terms, computed as one
batched GEMM ``(k, M, c) @ (k, c, 2n)`` and summed: the error becomes O(u·(√c + √k)) whatever
the kernel (measured 2.1–3.0e-7 at n=1024 for every batch), for k× the output traffic.

In the split bf16 modes (bf16, bf16x3) and tf32 the contraction is not chunked: their bars
(4e-3, 1e-5, 2e-3) are 20–8000× the fp32 summation error of a 2n-term sum, and a GPU's tensor
cores accumulate in fp32 anyway; the k partial products cost k× the output traffic (at n = 256 the
chunked bf16 leaf wrote and re-read its 2n-wide output twice, then wrote it again).

Layout: the GEMM reads and writes the *interleaved* order ``[re_0, im_0, re_1, im_1, …]`` (the
matrix's rows and columns permuted to it). That is a complex64 tensor's own memory, so a leaf at
the root reads the user's data where it lies and its output is packed into the complex result
without a pass (:func:`trnplan.kernels.complex.pack`); a pair that is not one buffer is
interleaved by one copy, as the split ``cat([re, im])`` was.

Memory: the matrix holds 4n² values; it is capped at ``MAX_MATRIX_BYTES``.
"""

from __future__ import annotations

import numpy as np
import torch

from trnplan.core.accuracy import (
    UNIT_ROUNDOFF,
    combine,
    gemm_error,
    sqrt_growth,
    storage,
)
from trnplan.core.cost import Work, copy, gemm_work
from trnplan.kernels import dft_matrix, fused_complex_matrix
from trnplan.kernels.complex import interleaved, planes
from trnplan.kernels.gemm import Gemm
from trnplan.planner.solver import Solver, best_variant, itemsize

#: the 2n×2n matrix may take at most this much memory (fp32: n ≤ 2048; fp64: n ≤ 1448)
MAX_MATRIX_BYTES = 64 * 2**20
#: longest run of terms summed inside one GEMM before partial sums are added
CHUNK = 256
#: error model u·(a + b·(√c + √k)) per precision, c the chunk length and k the chunk count:
#: a covers the rounding of the matrix entries (fp64 at n=3 measured 2.9u), b the summation;
#: fitted to bench/accuracy.py at batch 1 and 4 and rounded up (docs/precision.md)
ERROR_AB = {"fp32": (2.5, 0.3), "fp64": (3.0, 0.45)}
#: ... b for GEMMs of 4+ rows, which MKL's sgemm sums blockwise: the fit over the grid at batch 4
#: was 0.081 (n=64) against 0.186 (n=97) at batch 1, and b was set to 0.1; the per-node contract
#: test (tests/test_real_nd.py) then measured 2.8-3.0e-7 at n = 128…1024, batch 4…64 (4 seeds,
#: 1 and 2 threads) where 0.1 predicts 2.5-2.6e-7: the fit there is b = 0.148, so 0.16. Four-step
#: leaves always have many rows: with b = 0.3 a (four-step 4096=64x64 (dft-gemm) (dft-gemm)) tree
#: was predicted at 5.4e-7, over fp32's 5e-7 bar, where it measures 2.8e-7; with 0.16, 4.0e-7
ERROR_B_BLOCKED = {"fp32": 0.16, "fp64": 0.45}
BLOCKED_ROWS = 4
#: modes whose contraction is one GEMM, not chunked (module docstring)
UNCHUNKED = ("bf16", "bf16x3", "tf32")


#: the finer chunks tried where the default's one chunk's predicted error is over the bound (a share of an
#: nd plan's: three fp32 (dft-gemm 128) passes are 3.1e-7 each, 5.4e-7 together, over the 5e-7
#: bar). 128 is a NeuronCore's own: its Tensor Engine contracts at most 128 partitions per matmul
#: and accumulates a longer contraction in fp32 PSUM 128 rows at a time (NKI architecture guide,
#: trainium_inferentia2_arch.rst; trnplan.backends.trainium [ARCH2])
FINER_CHUNKS = (128, 64, 32)


def chunking(n: int, precision: str = "fp32", chunk: int | None = None) -> tuple[int, int]:
    """(k, c): the 2n-term contraction as k chunks of c terms (k·c ≥ 2n, zero-padded), at most
    ``chunk`` terms each (default :data:`CHUNK`)."""
    if precision in UNCHUNKED:
        return 1, 2 * n
    k = -(-2 * n // (chunk or CHUNK))
    return k, -(-2 * n // k)


def node_chunking(node, precision: str) -> tuple[int, int]:
    """:func:`chunking` of a dft-gemm node (its ``chunk`` parameter, where the planner chose a finer one)."""
    return chunking(node.n, precision, node.param("chunk", None))


def chunk_work(n: int, b: int, k: int, c: int, size: int) -> Work:
    """What a chunked contraction (k > 1) adds to :class:`DFTGemm`'s GEMM: the transposed batched
    operand, and the sum of the k partial products."""
    if k == 1:
        return Work()
    return Work(launches=2, elementwise_flops=2 * n * b * k, bytes=(k * c * b + 2 * n * b * (k + 1)) * size)


class DFTGemm(torch.nn.Module):
    """``y = [xr | xi] @ W`` with ``W = [[Re F, Im F], [-Im F, Re F]]``, contraction in k chunks,
    both sides in the interleaved order (module docstring).

    The GEMM runs through :class:`~trnplan.kernels.gemm.Gemm`, so the plan's precision mode
    (bf16 slicing, TF32) applies to it; the partial sums of the chunks are added in fp32.
    """

    def __init__(self, n: int, w: np.ndarray, ctx, chunk: int | None = None):
        super().__init__()
        self.n = n
        self.k, self.c = chunking(n, ctx.precision, chunk)
        # rows: interleaved input; columns: interleaved output. w[order][:, order] (order =
        # interleave_order(n)) as one strided copy: the same values, 3x-9x faster than two gathers
        # (n=256: 0.37 vs 3.2 ms; n=1024: 11 vs 47 ms), paid at every dft-gemm plan's build
        w = w.reshape(2, n, 2, n).transpose(1, 0, 3, 2).reshape(2 * n, 2 * n)
        pad = self.k * self.c - 2 * n
        if pad:
            w = np.concatenate([w, np.zeros((pad, 2 * n))])
        self.gemm = Gemm(w.reshape(self.c, 2 * n) if self.k == 1 else w.reshape(self.k, self.c, 2 * n), ctx)

    def forward(self, re, im):
        M, n = re.shape[0], self.n
        x = interleaved(re, im)  # (M, 2n): a view of a complex64 input
        if self.k == 1:
            y = self.gemm(x)
        else:
            if self.k * self.c > 2 * n:
                x = torch.cat([x, x.new_zeros(M, self.k * self.c - 2 * n)], dim=-1)
            y = self.gemm(x.view(M, self.k, self.c).transpose(0, 1)).sum(0)  # (k, M, c); partial sums in fp32
        return planes(y)


class DFTGemmSolver(Solver):
    name = "dft-gemm"
    #: 2: the blocked fp32 summation constant went 0.1 -> 0.16 (it under-predicted at batch >= 4);
    #: 3: a finer chunk (option chunk=) where the default contraction is over the bound
    version = 3
    options = ("chunk",)

    def why_not(self, problem, planner, forced):
        matrix = 4 * problem.n**2 * itemsize(problem)
        if matrix > MAX_MATRIX_BYTES:
            return (
                f"n={problem.n} needs a {matrix / 2**20:.1f} MiB DFT matrix, over the "
                f"{MAX_MATRIX_BYTES // 2**20} MiB cap"
            )
        return None

    def why_not_spec(self, problem, spec):
        reason = super().why_not_spec(problem, spec)
        chunk = spec.option("chunk")
        if reason is None and chunk is not None and not 1 <= chunk < 2 * problem.n:
            return f"dft-gemm's chunk is a contraction length from 1 to 2n-1 = {2 * problem.n - 1}; got {chunk}"
        return reason

    def plan(self, problem, planner, spec):
        forced = spec.option("chunk") if spec is not None else None
        if forced is not None:
            return self._plan_chunk(problem, planner, forced)
        node = self._plan_chunk(problem, planner, None)
        tol = planner.tol(problem)
        k, c = chunking(problem.n, problem.precision)
        if node.error <= tol or problem.precision in UNCHUNKED or k > 1:
            return node
        # a one-chunk contraction over the bound: a finer one (more partial sums, each shorter)
        # where one is within it. Not for a contraction already chunked (n > 128): its partial
        # sums would multiply (32 of them at n = 2048), where other solvers are cheaper
        finer = [f for f in FINER_CHUNKS if f < c]
        return best_variant(lambda c: node if c is None else self._plan_chunk(problem, planner, c),
                            [None, *finer], tol=tol)

    def _plan_chunk(self, problem, planner, chunk):
        n, b, size = problem.n, problem.batch, itemsize(problem)
        k, c = chunking(n, problem.precision, chunk)
        # interleaving re and im (free where they are one buffer: a complex input); the GEMM reads that
        # operand (k·c·b values, zero-padded) and the matrix and writes k partial products; each chunk is a
        # (b × c) @ (c × 2n) GEMM on a matrix engine's tiles
        work = copy(2 * n * b, size) + Work(
            launches=1,
            bytes=(k * c * b + 2 * n * k * c + 2 * n * b * k) * size,
        ) + gemm_work(problem.precision, planner.profile, 2.0 * (k * c) * (2 * n) * b, k * c * b, size,
                      shape=(b, c, 2 * n))
        work += chunk_work(n, b, k, c, size)
        a, b_ = ERROR_AB[storage(problem.precision)]
        if b >= BLOCKED_ROWS:
            b_ = ERROR_B_BLOCKED[storage(problem.precision)]
        error = UNIT_ROUNDOFF[problem.precision] * (a + b_ * (sqrt_growth(c) + sqrt_growth(k)))
        # one GEMM stage: its operands rounded or split in the reduced modes
        error = combine(error, gemm_error(problem.precision, 1, planner.probe, n * b))
        return self.node(problem, planner, work, error, params={"chunk": chunk} if chunk else ())

    def build(self, node, ctx):
        return self.build_scaled(node, ctx, 1.0)

    def scale_folds(self, node):
        return True

    def build_scaled(self, node, ctx, scale):
        w = fused_complex_matrix(dft_matrix(node.n, 1 if node.inverse else -1), left=False)
        return DFTGemm(node.n, w * scale if scale != 1.0 else w, ctx, node.param("chunk", None))
