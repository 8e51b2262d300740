"""native: the device's own FFT library (torch.fft: MKL/pocketfft on the CPU, cuFFT on CUDA).

A leaf that applies wherever the backend has a native FFT for the precision. On Neuron there
is none (``aten::fft_*`` is unsupported by neuronx-cc); there the host library is a fallback
candidate priced with transfer and dispatch (the Trainium backend issue).
"""

from __future__ import annotations

import functools
import math

import attrs
import torch

from trnplan.core.accuracy import STORAGE, UNIT_ROUNDOFF, log_growth
from trnplan.core.errors import PlanningError
from trnplan.kernels.hostlib.threads import adaptive, in_threads
from trnplan.planner.leafcost import LeafShape, leaf_work
from trnplan.planner.solver import VARIANTS, Solver, library_io, note_variant, prime_factors

#: error constant c of c·u·√log2(n) per precision: measured ratios error/(u·√log2 n) reached
#: 0.69 (fp32) and 1.02 (fp64) on the test grid (bench/accuracy.py); off the grid fp64 n = 3125 = 5^5
#: measured 1.89 (radix-5 passes), so fp64 is 2.0
ERROR_C = {mode: {"fp32": 1.0, "fp64": 2.0}[store] for mode, store in STORAGE.items()}
#: a prime factor p ≤ BLUESTEIN_PRIME runs as a direct O(p²) pass with error growing as √p:
#: fp64 n=31 measured 3.6u where the smooth model gives 3.1u; the factor (1 + √p/8) covers it
PRIME_PASS_SLOPE = 1 / 8
#: sizes with a prime factor above BLUESTEIN_PRIME run the library's chirp-z path, measured at
#: up to 1.35 (fp32) and 2.12 (fp64) × u·√log2 n: twice the smooth constant bounds them
LARGE_PRIME_GAIN = 2.0
#: native libraries fall back to a chirp-z (Bluestein) algorithm for large prime factors (97
#: already measures like one in bench/accuracy.py, 31 does not)
BLUESTEIN_PRIME = 50
#: MKL's double-precision DFT (torch.fft on the CPU, and mkl_fft) loses accuracy linearly in a
#: prime factor 17 ≤ p ≤ 150 of many composite lengths: measured 1.6-1.9·u·p (u = 2^-53) at
#: n = 34, 46, 51, 76, 124, 153, 194, 217, 254, 262, 272, 508, 582, 776, 99328 (2.8e-14 at
#: 2·131), where 3·97, 5·97, 2·151, 2·199 and primes alone measure 2-5u, and pocketfft and FFTW
#: 2-4u at every one of them. Which lengths take that path is MKL's undocumented choice, so every
#: composite length with such a factor is bounded by MKL_FP64_PRIME_GAIN·u·p (the fp64 bar, 1e-13,
#: still holds: p = 150 gives 4.2e-14). fp32 is not affected (1.9e-7 at 2·97)
MKL_FP64_PRIMES = (17, 150)
MKL_FP64_PRIME_GAIN = 2.5
#: MKL's c2c DFT of a *single* transform (howmany 1: torch.fft.fft/ifft on an (n,) or (1, n)
#: tensor, mkl_fft likewise) of a composite length n > MKL_SINGLE_MIN_N with prime factors
#: ≥ MKL_SINGLE_PRIME takes a path whose error grows linearly in those factors, in fp32 and
#: fp64 alike. Measured 2026-11-27 (torch 2.13.0+cpu, MKL, seeded complex normal input against
#: numpy.fft in complex128; every n ≤ 20000 and every 97th n to 400000 with a prime factor over
#: 50, every 7th with the largest in 17…50): 4740 of the 19998 lengths ≤ 20000 over
#: 1.6·u·√log2 n, 19816 = 8·2477 at 60× (1.4e-5 in complex64, 27× fp32's bar), 1185× beyond;
#: the ratio to u·√log2 n at most 0.071·S, S the sum of the prime factors ≥ 17 with multiplicity
#: (27869 = 29·31²: 6.5; 134461 = 43·53·59: 7.4); fp64 24594 = 6·4099: 5.5e-14 (130×). Two or
#: more transforms in a batch, the 2-D path (fft2 of (1, n)), r2c/c2r, pocketfft and FFTW:
#: within the smooth model (≤ 1.4×); n ≤ 4096: ≤ 1.29× (all lengths). So the bound is
#: MKL_SINGLE_SLOPE·S·u·√log2 n there (the fit rounded up), over fp32's bar from S ≈ 30 on.
MKL_SINGLE_MIN_N = 4096
MKL_SINGLE_PRIME = 17
MKL_SINGLE_SLOPE = 0.08
#: ... and that path is less accurate on smooth lengths too: every 13-smooth n in 4097…400000
#: (complex64, one transform against a batch of two of the same rows, both directions) measured up
#: to 2.95 u·√log2 n (13^5 = 371293), over fp32's bar at ten of them (11^5, 13^5, 11·13^4, …), where
#: the batch of two measured at most 0.90; over the smooth model's g by up to 2.03 (13^5), 1.93 (7^5),
#: 1.79 (11^5), 1.57 (5^7), and 1.19 with factors 2 and 3 alone (26244 = 2²·3⁸). So the bound is
#: g·MKL_SINGLE_GAIN·(1 + MKL_SINGLE_SMOOTH·S₅), S₅ the sum of the prime factors 5…13 with
#: multiplicity (fitted: at most 1.19 with 0.02). fp64's single inverse measured up to 4.7 u·√log2 n
#: against a long-double reference (67228 = 2²·7^5; 524288 = 2^19: 4.1), its forward 2.1: 2.5 there.
MKL_SINGLE_GAIN = {"fp32": 1.2, "fp64": 2.5}
MKL_SINGLE_SMOOTH = 0.02
#: ... and that path is slow: torch.fft (MKL) on a prime p took 11 µs (127), 60 (997), 267
#: (4093), 521–783 (8191), 2926 (16411), 9991 (65537) here: after the ~8 µs call cost, 27–49×
#: the time of 5·p·log2 p flops at the smooth rate up to p ≈ 8K, and 76–102× beyond (out of
#: cache). The factor applies to the prime part: n = (n/p)·p costs (n/p) prime transforms of
#: length p on top of the smooth work.
PRIME_SLOWDOWN = ((8192, 40.0), (float("inf"), 90.0))


def thread_variants(node, problem, spec, one_by_default: bool):
    """A CPU leaf's thread count made explicit: ``node`` with the count a strategy names (its
    ``threads`` option, and ``adapt=T1``: the adaptive count of measured planning, k threads while
    they pay and one while a call shows the other core busy, :class:`~trnplan.kernels.hostlib.threads.AdaptiveThreads`
    with the one-thread time T1 µs), else ``node`` itself, with the other count offered to measured planning.

    ``node`` is the leaf at its implicit count: one thread where ``one_by_default`` (pyFFTW),
    else torch's thread count at call time (torch.fft, mkl_fft, scipy). With torch threads > 1
    on the CPU the variant at the other count (torch's, or one) is noted (:func:`note_variant`):
    priced as ``node``, it never changes the estimate's pick, and measured planning times both
    (a two-thread OpenMP call stalls when another process holds a core:
    :mod:`trnplan.kernels.hostlib.threads`)."""
    forced = dict(spec.options).get("threads") if spec is not None else None
    adapt = dict(spec.options).get("adapt") if spec is not None else None
    if adapt is not None and (forced is None or forced < 2 or adapt < 1):
        raise PlanningError(f"{node.solver}'s option adapt=T1 (the one-thread call's time in µs, ≥ 1) runs "
                            f"threads=k > 1 while they pay and one thread under load: it needs threads=2 or more "
                            f"and T1 ≥ 1, got threads={forced}, adapt={adapt}")
    if forced is not None:  # a strategy, or a stored tree replayed, names the thread count
        if forced < 1:
            raise PlanningError(f"{node.solver}'s option threads must be ≥ 1, got {forced}")
        if problem.device != "cpu":
            raise PlanningError(f"{node.solver}'s option threads sets a CPU library's thread count; "
                                f"this problem is on {problem.device!r}: leave threads out")
        if one_by_default and forced == 1:
            return node
        extra = (("adapt", adapt),) if adapt is not None else ()
        return attrs.evolve(node, params=(*node.params, ("threads", forced), *extra))
    threads = torch.get_num_threads()
    if problem.device == "cpu" and threads > 1:
        note_variant(attrs.evolve(node, params=(*node.params, ("threads", threads if one_by_default else 1))))
    return node


class NativeFFT(torch.nn.Module):
    """``torch.fft.fft`` / unscaled ``ifft`` on split tensors, at ``threads`` threads (None: torch's);
    with ``adapt`` (the one-thread call's time, µs) at ``threads`` or one per call
    (:func:`~trnplan.kernels.hostlib.threads.adaptive`)."""

    def __init__(self, n: int, inverse: bool, threads: int | None = None, adapt: int | None = None):
        super().__init__()
        self.n, self.inverse, self.threads, self.adapt = n, inverse, threads, adapt
        # an adaptive call keeps its state (the back-off) across calls: made once for forward()
        self._adaptive = self.library_call() if adapt is not None else None

    def __getstate__(self):
        # the adaptive call is closures (not picklable) and run-time state: made again on loading
        return {**self.__dict__, "_adaptive": None}

    def __setstate__(self, state):
        super().__setstate__(state)
        self._adaptive = self.library_call() if self.adapt is not None else None

    def library_call(self, norm: str | None = None):
        """The torch.fft function for this node, unscaled unless a torch.fft ``norm`` is given.

        A plan whose root is this node calls it directly on complex input with the user's norm,
        skipping the split into (re, im) and back.
        """
        fn = torch.fft.ifft if self.inverse else torch.fft.fft
        unscaled = "forward" if self.inverse else "backward"  # torch.fft's name for "no 1/n here"
        if (norm or unscaled) != "backward":
            fn = functools.partial(fn, dim=-1, norm=norm or unscaled)
        # else torch.fft's defaults (dim=-1, "backward"): the bare function, no keywords to parse
        # (0.1-0.2 µs of a 2.5 µs call at n=256, measured here)
        # the wrapper only for an explicit count (a wisdom hit's lowering makes no call more)
        if self.adapt is not None:
            return adaptive(in_threads(fn, 1), in_threads(fn, self.threads), self.adapt * 1e-6, self.threads)
        return fn if self.threads is None else in_threads(fn, self.threads)

    def forward(self, re: torch.Tensor, im: torch.Tensor):
        y = (self._adaptive or self.library_call())(torch.complex(re, im))
        return y.real, y.imag


def mkl_fp64_floor(n: int, precision: str) -> float:
    """The least error MKL's fp64 DFT of length ``n`` is bounded by (:data:`MKL_FP64_PRIMES`)."""
    p = max(prime_factors(n), default=1)
    lo, hi = MKL_FP64_PRIMES
    if STORAGE[precision] != "fp64" or not lo <= p <= hi or p == n:
        return 0.0
    return MKL_FP64_PRIME_GAIN * UNIT_ROUNDOFF[precision] * p


def mkl_single(problem, error: float) -> float:
    """The error bound of MKL's c2c DFT of ``problem`` given the smooth model's ``error``: widened
    where it is one transform (:data:`MKL_SINGLE_SLOPE`, :data:`MKL_SINGLE_GAIN`): a rank-1 c2c
    problem of batch 1 and composite length over :data:`MKL_SINGLE_MIN_N`; else ``error``."""
    n = problem.n
    factors = prime_factors(n)
    if problem.kind != "c2c" or problem.rank != 1 or problem.batch != 1 or n <= MKL_SINGLE_MIN_N or len(factors) < 2:
        return error  # a prime length alone is within the smooth model's chirp-z bound (4093 … 65537: ≤ 1.2×)
    small = sum(p for p in factors if 5 <= p < MKL_SINGLE_PRIME)
    smooth = error * MKL_SINGLE_GAIN[STORAGE[problem.precision]] * (1.0 + MKL_SINGLE_SMOOTH * small)
    large = sum(p for p in factors if p >= MKL_SINGLE_PRIME)
    return max(smooth, MKL_SINGLE_SLOPE * large * UNIT_ROUNDOFF[problem.precision] * log_growth(n))


def cpu_fft_is_mkl() -> bool:
    """Whether torch.fft on the CPU is MKL (x86 builds; ARM builds run pocketfft)."""
    return torch.backends.mkl.is_available()


class Native(Solver):
    name = "native"
    #: 2: priced without packing at the root and without a second count of the library's own pass
    #: (every solver's decisions moved with it: the registry digest, and so all wisdom, changes);
    #: 3: MKL's fp64 error floor for composite lengths with a prime factor 17…150;
    #: 4: the one-thread variant (``threads=1``) that measured planning times (thread_variants);
    #: 5: MKL's error bound for a single transform (mkl_single)
    version = 5
    #: ``threads=k``: torch.fft at k threads (torch.set_num_threads for the call); none: torch's count;
    #: ``adapt=T1`` with it: k threads or one per call (thread_variants)
    options = ("threads", "adapt")
    precisions = ("fp32", "fp64")
    precision_refusal = ("the native library (torch.fft) has no {precision} mode: it computes in fp32 or fp64 "
                         "only; use precision='fp32' or 'auto' to have it considered")

    def why_not(self, problem, planner, forced):
        if not planner.has_native_fft(problem.precision):
            return f"the {problem.device} backend has no native FFT for precision {problem.precision}"
        return None

    def plan(self, problem, planner, spec):
        n = problem.n
        p = max(prime_factors(n), default=1)
        large_prime = p > BLUESTEIN_PRIME
        # the library's own pass over the data is in its measured rate; packing split input to
        # complex costs a pass more, except at the root, where the plan calls it on the user's tensor
        shape = LeafShape.of(problem, PRIME_SLOWDOWN, half=1.0)
        work = library_io(problem, planner) + leaf_work(problem, planner, self.name, shape)
        error = ERROR_C[problem.precision] * UNIT_ROUNDOFF[problem.precision] * log_growth(n)
        error *= LARGE_PRIME_GAIN if large_prime else 1.0 + (PRIME_PASS_SLOPE * math.sqrt(p) if p > 7 else 0.0)
        if problem.device == "cpu":  # torch.fft is MKL there (cuFFT on CUDA)
            error = max(error, mkl_fp64_floor(n, problem.precision))
            if cpu_fft_is_mkl():  # a single transform's path (MKL_SINGLE_SLOPE, MKL_SINGLE_GAIN)
                error = mkl_single(problem, error)
        node = self.node(problem, planner, work, error, direct=True)
        if (spec is None or not spec.options) and VARIANTS.get() is None:
            return node  # no count named, none to offer (a replay, a child's search): one call less
        return thread_variants(node, problem, spec, False)

    def runs_on_user_tensor(self, node):
        return True

    def build(self, node, ctx):
        params = dict(node.params)  # no call into core per build
        return NativeFFT(node.n, node.inverse, params.get("threads"), params.get("adapt"))
