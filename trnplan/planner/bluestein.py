"""bluestein: the chirp-z transform for any n (Bluestein 1970; Rabiner, Schafer & Rader 1969).

With jk = (j² + k² − (k − j)²)/2 the DFT becomes a convolution:

    X[k] = w[k] · Σ_j (x[j]·w[j]) · conj(w[k − j]),     w[j] = exp(sign·πi·j²/n)

computed as a circular convolution of length m ≥ 2n − 1 by a forward FFT, a pointwise product
with the precomputed spectrum of the chirp, and an inverse FFT. Both inner transforms of
length m are planned through the planner; m is the next power of two or the next 5-smooth
length, whichever the cost model prefers.

Accuracy: the chirp index j² is reduced mod 2n in int64 and the angle formed in float64, and
the chirp's spectrum is computed in float64 by numpy and cast once. The seed project formed
π·k²/n in float32 and measured 2e-2 at n ≥ 500 on hardware and 9e-4 at n = 8193 on the host
(../shared/FACTS.md).

In an unforced search Bluestein applies only when n has a prime factor above 7: for smooth n
the direct solvers are always cheaper, and this rule also keeps its own inner (smooth) length
from recursing back into Bluestein.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
import torch.nn.functional as F

from trnplan.core import state
from trnplan.core.accuracy import SMALL_SAMPLE, UNIT_ROUNDOFF, combine, storage
from trnplan.core.cost import REDUCED_GEMM_MODES, cmul_work, copy
from trnplan.kernels import chirp, cmul
from trnplan.planner.solver import Solver, best_variant, itemsize, prime_factors

#: chirp rounding (three chirp/spectrum products) added to the inner errors: c·u
ERROR_C = 4.0
#: gain on the inner transforms' errors: with gain 1.5 the measured/predicted ratio stayed
#: ≤ 0.42 over the test grid (bench/accuracy.py); at 1.0 fp64 n=997 reached 0.94, so 1.2
INNER_GAIN = {"fp32": 1.0, "fp64": 1.2}
#: (fp32: with gain 1.2 the worst measured/predicted ratio was 0.54 over the grid, so 1.0 keeps
#: it ≤ 0.65 and lets (bluestein 997 m=2187 (four-step …) (four-step …)) meet fp32's 5e-7)
#: in the reduced modes (bf16, bf16x3, bf16x6) the inner transforms' operand rounding dominates
#: and the measured error is 0.75–0.90 × the root-sum-square of their predictions at n = 97, 509,
#: 4099, 10007, but up to 1.05 × at n = 500–1000 in bf16 (m = 1000, 2000 over 25-, 40-, 50-point
#: leaves) and for bf16x3 at n = 5 (bench/accuracy.py --section solvers): gain 1.15, times the
#: ratio of the small-sample widening of n points to that of the m points the children were
#: predicted for (bf16 n=3, m=5 measured 5.6e-3)
INNER_GAIN_REDUCED = 1.15
SMOOTH_PRIMES = (2, 3, 5, 7)


def next_power_of_two(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@functools.lru_cache(maxsize=1024)
def next_smooth(n: int) -> int:
    """Smallest m ≥ n of the form 2^a·3^b·5^c (enumerated, not searched: O(log³ n))."""
    best = next_power_of_two(n)
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            m = p35
            while m < n:
                m *= 2
            best = min(best, m)
            p35 *= 3
        p5 *= 5
    return best


class BluesteinFFT(torch.nn.Module):
    def __init__(self, n: int, m: int, forward_fft, inverse_fft, sign: int, ctx):
        super().__init__()
        self.n, self.m = n, m
        self.forward_fft, self.inverse_fft = forward_fft, inverse_fft
        w = chirp(n, sign)
        b = np.zeros(m, dtype=np.complex128)
        b[:n] = np.conj(w)
        b[m - n + 1 :] = np.conj(w[1:])[::-1]
        spectrum = np.fft.fft(b) / m  # float64; the 1/m of the inner inverse folded in
        for name, value in (("w", w), ("b", spectrum)):
            vr, vi = ctx.split_const(value)
            self.register_buffer(f"{name}r", vr)
            self.register_buffer(f"{name}i", vi)

    def forward(self, re, im):
        ar, ai = cmul(re, im, self.wr, self.wi)
        pad = (0, self.m - self.n)
        ar, ai = self.forward_fft(F.pad(ar, pad), F.pad(ai, pad))
        cr, ci = cmul(ar, ai, self.br, self.bi)
        cr, ci = self.inverse_fft(cr, ci)
        return cmul(cr[:, : self.n], ci[:, : self.n], self.wr, self.wi)


class Bluestein(Solver):
    name = "bluestein"
    composite = True
    options = ("m",)

    def why_not(self, problem, planner, forced):
        if not forced and max(prime_factors(problem.n), default=1) <= max(SMOOTH_PRIMES):
            return f"n={problem.n} has no prime factor above {max(SMOOTH_PRIMES)} (direct solvers are cheaper)"
        return None

    def why_not_spec(self, problem, spec):
        m = spec.option("m")
        if isinstance(m, int) and m < 2 * problem.n - 1:  # a non-int m is refused by the base check
            return f"bluestein's padded length m={m} is under 2n-1={2 * problem.n - 1}"
        return super().why_not_spec(problem, spec)

    def plan(self, problem, planner, spec):
        n = problem.n
        least = 2 * n - 1
        forced_m = spec.option("m") if spec is not None else None
        if forced_m is not None:
            lengths = [forced_m]
        else:
            lengths = sorted({next_power_of_two(least), next_smooth(least)})
        return best_variant(lambda m: self._plan_length(problem, planner, spec, m), lengths,
                            tol=planner.tol(problem))

    def _plan_length(self, problem, planner, spec, m):
        n, b, size = problem.n, problem.batch, itemsize(problem)
        sub_f = problem.unscaled(m, b, False), spec.child(0) if spec else None
        sub_i = problem.unscaled(m, b, True), spec.child(1) if spec else None
        fwd, inv = planner.plan(*sub_f), planner.plan(*sub_i)
        work = cmul_work(n * b, size) * 2 + cmul_work(m * b, size) + copy(2 * m * b, size, launches=2)
        chirps = ERROR_C * UNIT_ROUNDOFF[problem.precision]
        if problem.precision in REDUCED_GEMM_MODES:
            gain = INNER_GAIN_REDUCED * (1 + SMALL_SAMPLE / math.sqrt(n * b)) / (1 + SMALL_SAMPLE / math.sqrt(m * b))
        else:
            gain = INNER_GAIN[storage(problem.precision)]
        error = combine(gain * fwd.error, gain * inv.error, chirps)
        tol = planner.tol(problem)
        if error > tol > chirps:  # the cheapest inner plans together exceed the bound: give each a share
            share = math.sqrt((tol * tol - chirps * chirps) / 2) / gain
            tighter = planner.plan_share(*sub_f, share), planner.plan_share(*sub_i, share)
            if None not in tighter:
                fwd, inv = tighter
                error = combine(gain * fwd.error, gain * inv.error, chirps)
        return self.node(problem, planner, work, error, params={"m": m}, children=(fwd, inv))

    def build(self, node, ctx):
        return BluesteinFFT(node.n, node.param("m"), ctx.build(node.children[0]), ctx.build(node.children[1]),
                            1 if node.inverse else -1, ctx)


state.register("planner.bluestein.next_smooth", next_smooth.cache_clear)
