"""scipy, pyfftw, mkl-fft: host-CPU FFT libraries as leaf solvers.

Each is a leaf like :mod:`~trnplan.planner.native` that calls one library
(:mod:`trnplan.kernels.hostlib` holds the glue): scipy.fft (pocketfft), pyFFTW (FFTW 3;
Frigo & Johnson, Proc. IEEE 93(2), 2005) and mkl_fft (Intel MKL's DFTI). No FFT library wins
everywhere on the CPU (../shared/FACTS.md, and the measurements below): FFTW is fastest on a
single long transform, MKL on primes, torch.fft on large batches of short ones, so each is a
candidate and the cost model chooses. They plan c2c, r2c and c2r of any rank in one call.

They apply only on the CPU, in fp32 or fp64, where the library is installed, and never to a
plan that is exported as an artifact (``compile='aot'``): an AOTInductor package runs torch ops
only. On CUDA the library leaf is cuFFT, through ``native``.
"""

from __future__ import annotations

import math
from typing import ClassVar

import attrs
import torch

from trnplan.core.accuracy import SMALL_SAMPLE, STORAGE, UNIT_ROUNDOFF, log_growth
from trnplan.kernels import hostlib
from trnplan.planner import native
from trnplan.planner.leafcost import LeafShape, leaf_work
from trnplan.planner.solver import VARIANTS, Solver, WholeShape, library_io, prime_factors

#: The constants below were measured on this project's 2-vCPU box (AMD EPYC, 2 threads, torch
#: 2.13.0+cpu, scipy 1.17.1, pyfftw 0.15.1, mkl_fft 2.3.2 with MKL 2026.2), complex64, with a
#: throwaway script timing each library through this module's glue (Tensor.numpy() → library →
#: torch.from_numpy) against torch.fft, round-robin over 15–40 rounds, three runs; the machine
#: is noisy (another process shares it), so each figure is the median over runs of the per-run
#: minimum, as a ratio to torch.fft's time in the same run:
#:
#: ============  ==============  =========  =========  ========  =============
#:  library      per call, n=16   1024×1024  1×65536   16384×64  primes (µs)
#: ============  ==============  =========  =========  ========  =============
#:  torch.fft     4.0–9.2 µs      1.00       1.00      1.00      4×997: 116, 4×4093: 917, 65537: 8024
#:  scipy         +7–11 µs        1.1        3.3       4.0       90, 1028, 2394
#:  pyfftw        −2–+3 µs        0.93       0.72      0.95      49, 220, 1254
#:  mkl-fft       −1–+2.5 µs      1.03       1.0       0.93      36, 171, 2840
#: ============  ==============  =========  =========  ========  =============
#:
#: (scipy threads over the batch only, so one long transform runs on one thread: 3.3×.) The
#: factors are fitted so that this model's prediction, relative to native's, reproduces those
#: ratios (the per-call cost and the bytes kept as native's): ``speed`` multiplies the nominal
#: flops in three regimes of the longest axis (≤ 256: fitted at n=64; ≤ 8192: at 1024; beyond:
#: at 65536), ``call_excess_us`` is the per-call time beyond torch.fft's (as extra launches; the
#: last runs, through the final glue, gave scipy +10.7, pyfftw +2.8, mkl-fft +2.3 µs, of which
#: Tensor.numpy() and torch.from_numpy alone cost 3.6 µs), and ``prime_slowdown`` plays
#: native.PRIME_SLOWDOWN's part for the library's own large-prime path (fitted at 4×997 and
#: 4×4093 — averaged — and at 65537). ``speed`` is the fitted factor per regime; the ratios above
#: become e.g. scipy (10.4, 1.17, 5.0) because the model's bytes and call costs do not scale.
#: complex128 was not timed: the same factors are used, on the profile's fp64 rate.
SPEED_LIMITS = (256, 8192, float("inf"))


class HostLibrary(WholeShape, Solver):
    """A host-CPU FFT library as a leaf: c2c, r2c and c2r of any rank, in one library call.

    Subclasses name the library (``library``: its key in :mod:`trnplan.kernels.hostlib`), how to
    install it, and their measured cost constants.
    """

    composite = False
    version = 1
    kinds = ("c2c", "r2c", "c2r")
    ranks = "any"
    host_only = True
    #: ``threads=k``: the library call at k threads (:func:`~trnplan.kernels.hostlib.transform`)
    #: ``adapt=T1`` with ``threads=k``: k threads or one per call (native.thread_variants)
    options = ("kind", "threads", "adapt")
    word_options = ("kind",)
    takes_factors = True
    #: hostlib's key, the name users know, and the install hint
    library: ClassVar[str] = ""
    title: ClassVar[str] = ""
    install: ClassVar[str] = ""
    #: nominal-flop factor per regime of the longest axis (limits :data:`SPEED_LIMITS`)
    speed: ClassVar[tuple[float, float, float]] = (1.0, 1.0, 1.0)
    #: per-call time beyond torch.fft's, µs
    call_excess_us: ClassVar[float] = 0.0
    #: flop factor for a *batch* of N-D transforms (rank ≥ 2, batch > 1), on top of ``speed``
    nd_batched: ClassVar[float] = 1.0
    #: flop factor of the real kinds (r2c, c2r) per rank (1; 2 and more), beyond the half-length
    #: price every leaf gets (LeafShape's ``half``); uncalibrated profiles only (a fit has its own)
    real_kinds: ClassVar[dict] = {}
    #: whether the library is MKL (its fp64 error floor: native.mkl_fp64_floor)
    mkl: ClassVar[bool] = False
    #: (largest prime, slowdown) of the library's large-prime path, as native.PRIME_SLOWDOWN
    prime_slowdown: ClassVar[tuple] = native.PRIME_SLOWDOWN
    #: error constant c of c·u·√log2(n) per storage precision (native's form)
    error_c: ClassVar[dict] = {"fp32": 1.0, "fp64": 2.0}

    def why_not(self, problem, planner, forced):
        if getattr(planner.backend, "accelerator", False):
            return (f"host libraries are CPU leaves: on {problem.device!r} trnplan plans GEMM trees on the device and "
                    f"never moves data to the host by itself (x.cpu() and device='cpu' runs it there)")
        if problem.device == "neuron":
            return self.why_not_on_neuron(problem, planner)
        if problem.device != "cpu":
            return "host libraries are CPU leaves; on cuda the leaf is cuFFT via native"
        if problem.precision not in ("fp32", "fp64"):
            return (f"{self.title} computes in fp32 or fp64 only, not {problem.precision}; use precision='fp32' "
                    f"or 'fp64' (or 'auto') to have it considered")
        if not planner.has_native_fft(problem.precision):
            return (f"this backend prices no FFT library for {problem.precision} (its cost profile has no FFT "
                    f"rate), so a host library cannot be priced here")
        if planner.exportable:
            return "an artifact (compile='aot') cannot call a host library; it runs torch ops only"
        if hostlib.installed(self.library) is None:  # metadata only; a failed import reads as absent from then on
            return self.absent_reason()
        return None

    def absent_reason(self) -> str:
        """Why this library is not a candidate here: not installed, or installed but failing to import."""
        broken = hostlib.broken_reason(self.library)
        if broken is not None and hostlib.not_itself(self.library):  # imported, but another library's calls
            return f"{hostlib.unusable(self.library)} (in this process)"
        if broken is not None:
            return f"{self.title} is installed but failed to import in this process ({broken}); reinstall it"
        return f"{self.title} is not installed ({self.install})"

    #: whether the leaf without a ``threads`` param runs one thread (pyFFTW); else torch's count
    one_thread_by_default: ClassVar[bool] = False

    def plan(self, problem, planner, spec):
        if problem.device == "neuron":
            return self.plan_on_neuron(problem, planner, spec)
        # the thread count explicit (native.thread_variants): a strategy's, or the other count as a
        # variant for measured planning, priced as this leaf (the estimate's pick never changes)
        node = self.plan_host(problem, planner, spec)
        if (spec is None or not spec.options) and VARIANTS.get() is None:
            return node  # no count named, none to offer (a replay, a child's search): one call less
        return native.thread_variants(node, problem, spec, self.one_thread_by_default)

    def plan_host(self, problem, planner, spec):
        """The leaf's node on the CPU at its implicit thread count (priced; no variant noted)."""
        n, b, shape = problem.n, problem.batch, problem.shape
        largest = max((max(prime_factors(length), default=1) for length in shape), default=1)
        leaf = LeafShape.of(problem, self.prime_slowdown, calls=problem.rank)  # one pass per axis, as nd's lib
        speed = next(f for limit, f in zip(SPEED_LIMITS, self.speed) if max(shape) <= limit)
        # packing split input (as native's; none at the root, where the plan calls the library on
        # the user's tensor), plus the library's call cost beyond torch.fft's
        factor = self.nd_batched if problem.rank > 1 and b > 1 else 1.0
        if problem.kind != "c2c" and self.name not in planner.profile.leaves:
            factor *= self.real_kinds.get((problem.kind, min(problem.rank, 2)), 1.0)
        work = library_io(problem, planner) + leaf_work(
            problem, planner, self.name, leaf, speed=speed, excess_us=self.call_excess_us, factor=factor)
        error = self.error_c[STORAGE[problem.precision]] * UNIT_ROUNDOFF[problem.precision] * log_growth(n)
        if largest > native.BLUESTEIN_PRIME:
            error *= native.LARGE_PRIME_GAIN
        elif largest > 7:
            error *= 1.0 + native.PRIME_PASS_SLOPE * math.sqrt(largest)
        # a transform of few points is a noisy sample of the random-input error: fp32 n=7 × 3
        # measured up to 1.12e-7 over 30 seeds for every library (torch.fft's too) where the
        # formula gives 1.0e-7, so the bound is widened as accuracy.SMALL_SAMPLE describes (1.33×
        # there, 1.01× at 16K points)
        error *= 1.0 + SMALL_SAMPLE / math.sqrt(n * b)
        if self.mkl:  # MKL's fp64 path for lengths with a prime factor 17…150 (native.mkl_fp64_floor)
            error = max([error, *(native.mkl_fp64_floor(length, problem.precision) for length in shape)])
            error = native.mkl_single(problem, error)  # its single transform's path
        params = {}
        if problem.rank > 1:
            params["factors"] = shape
        if problem.kind != "c2c":
            params["kind"] = problem.kind
        return self.node(problem, planner, work, error, params=params, direct=True)

    def runs_on_user_tensor(self, node):
        return True

    def build(self, node, ctx):
        shape, kind = tuple(node.param("factors") or (node.n,)), node.param("kind", "c2c")
        # FFTW decides its algorithm now (from the plan record's wisdom, or by planning), not at
        # the first call: the build pipeline stores FFTW's wisdom after lowering, and a decision
        # made later was missing from it, so a new process re-measured and could pick another
        # algorithm (bitwise different results: the 48×40×36 r2c differed by 1.4e-4)
        threads, adapt = node.param("threads"), node.param("adapt")
        for k in (threads, 1) if adapt is not None else (threads,):
            hostlib.prepare(self.library, shape, kind, node.inverse, node.batch, ctx.dtype, k)
        return HostFFT(self.library, shape, kind, node.inverse, threads, adapt)

    # ------------------------------------------------------------------ Trainium host fallback
    # On device="neuron" a host library is the whole plan or nothing: a candidate at the root only
    # (a host leaf inside a device graph would cost a dispatch and a round trip per leaf), priced
    # as the CPU profile's library time for the whole batch (every core's bucket) plus the transfer
    # of input and output both ways at the backend's host_link_gbs (trnplan.backends.neuron.HOST_LINK_GBS). The device plans
    # it competes with pay ~0.7 ms per dispatch (NEURON_PROFILE), so small problems stay on the
    # host, as the seed project measured (fft N=1024: 16 ms through NKI, 28 µs on the host).

    def why_not_on_neuron(self, problem, planner) -> str | None:
        """Why this library is not the host fallback of a neuron problem (None: it is a candidate)."""
        if planner.depth > 1:
            return ("on Trainium a host library is a whole-plan fallback at the root, not a leaf inside a "
                    "device graph (each would cost a dispatch and a host round trip)")
        if problem.precision not in ("fp32", "bf16", "bf16x3", "bf16x6"):
            return (f"as Trainium's host fallback {self.title} stands in for the complex64 modes (fp32 and the "
                    f"bf16 modes, computing in fp32), not {problem.precision}")
        if hostlib.installed(self.library) is None:  # metadata only; a failed import reads as absent from then on
            return self.absent_reason()
        return None

    def plan_on_neuron(self, problem, planner, spec):
        """The host-fallback node of a neuron problem, priced on the CPU profile plus the transfer."""
        # the library computes a bf16-mode request in fp32: priced, and its error predicted, as fp32
        whole = attrs.evolve(problem, batch=problem.batch * problem.cores, device="cpu", cores=1, precision="fp32")
        host = self.plan_host(whole, planner.on_host(), spec)  # priced as plan() does on the CPU
        size = 4  # fp32
        moved = (max(1, 0 if problem.kind == "r2c" else 2) * math.prod(problem.in_shape)
                 + max(1, 0 if problem.kind == "c2r" else 2) * math.prod(problem.out_shape)) * whole.batch * size
        transfer_us = moved / (planner.backend.host_link_gbs * 1e3)  # in one way, out the other
        # terms left empty: the Neuron profile has no price for the CPU library's work terms
        return attrs.evolve(host, batch=problem.batch, time_us=host.time_us + transfer_us, terms=())


class HostFFT(torch.nn.Module):
    """One host library's transform on split tensors (and, at a plan's root, on complex ones).

    ``forward(*inputs)`` takes flat ``(M, points)`` tensors — ``(re, im)`` on the complex side,
    one real tensor for r2c — and returns the unscaled transform as ``(re, im)``, or ``(y,)`` for
    c2r, for any M.
    """

    def __init__(self, library: str, shape: tuple, kind: str, inverse: bool, threads: int | None = None,
                 adapt: int | None = None):
        super().__init__()
        self.library, self.shape, self.kind, self.inverse = library, tuple(shape), kind, inverse
        self.in_shape = (*shape[:-1], shape[-1] // 2 + 1) if kind == "c2r" else self.shape
        self.threads = threads  # the call's thread count (None: pyFFTW one, the others torch's count)
        self.adapt = adapt  # the one-thread call's time (µs): threads or one per call (hostlib.adaptive)
        self._unscaled = self._call(None)

    def _call(self, norm: str | None):
        def at(k):
            return hostlib.transform(self.library, self.shape, self.kind, self.inverse, norm, k)

        if self.adapt is None:
            return at(self.threads)
        return hostlib.adaptive(at(1), at(self.threads), self.adapt * 1e-6, self.threads)

    def library_call(self, norm: str | None = None):
        """The library's transform on the user-facing tensor ``(batch, *in_shape)``, with torch.fft's
        ``norm`` (None: unscaled). A plan whose root is this node calls it directly."""
        if norm is None:
            return self._unscaled
        return self._call(norm)

    def forward(self, *inputs):
        M = inputs[0].shape[0]
        x = inputs[0] if self.kind == "r2c" else torch.complex(*inputs)
        y = self._unscaled(x.reshape(M, *self.in_shape)).reshape(M, -1)
        return (y,) if self.kind == "c2r" else (y.real, y.imag)


class ScipyFFT(HostLibrary):
    """scipy.fft (pocketfft): threads over the batch (``workers``), not within one transform."""

    name = "scipy"
    library = "scipy"
    title = "scipy"
    install = "pip install scipy"
    speed = (10.4, 1.17, 5.0)
    call_excess_us = 10.0
    prime_slowdown = ((8192, 24.0), (float("inf"), 5.0))
    version = 2  # 2: the one-thread variant (workers=1) that measured planning times


class PyFFTW(HostLibrary):
    """pyFFTW (FFTW 3), plans made once per shape and reused: FFTW_ESTIMATE at effort estimate,
    FFTW_MEASURE in measured planning (hostlib.fftw_rigor), from FFTW's wisdom where it knows them."""

    name = "pyfftw"
    library = "pyfftw"
    title = "pyFFTW"
    install = "pip install 'trnplan[fftw]'"
    speed = (0.84, 0.84, 0.44)
    call_excess_us = 2.5
    prime_slowdown = ((8192, 13.0), (float("inf"), 30.0))
    #: pyFFTW's batched real transforms (FFTW_ESTIMATE plans, one thread) run well above half its
    #: c2c time. Measured 2026-11-27 (plans forced to pyfftw beside torch.fft's, torch 1 thread,
    #: busy 2-vCPU box, load 5–8, round-robin medians), measured / this model's price before:
    #: c2c 1.1–1.5× (1024×512, 64²×64, 32³×16); r2c 2.9× (1024×512), 2.4× (4096×64), 2.8× (256²×8),
    #: 5.1× (128²×128), 4.2× (64³×8); c2r 3.0× (1024×512), 8.1× (128²×128), 7.5× (64³×8). As
    #: ratios to torch.fft's time in the same run: r2c 1.3–3.6×, c2r 1.2–3.9× (the table above is
    #: the 2-thread, c2c-dominated run that set ``speed``). Taken below the medians, so that a
    #: library leaf is not chosen on a price it does not run at: 2.5 for 1-D, 4 (r2c) and 6 (c2r) N-D
    real_kinds: ClassVar[dict] = {("r2c", 1): 2.5, ("c2r", 1): 2.5, ("r2c", 2): 4.0, ("c2r", 2): 6.0}
    #: FFTW at torch's thread count is the variant (``threads=2``), for measured planning only: two
    #: OpenMP pools can stall each other on few cores (hostlib.fftw._fftw_threads), so only a
    #: round-robin timing beside torch.fft may choose it
    one_thread_by_default = True
    #: 2: the threads variant, and the estimate's margin rule and the round-robin measure changed what
    #: every plan picks (issue 19): the registry digest, and so all stored wisdom, changes with it;
    #: 3: the real kinds priced as measured (real_kinds)
    version = 3


class MklFFT(HostLibrary):
    """mkl_fft (Intel MKL's DFTI, its own MKL build)."""

    name = "mkl-fft"
    library = "mkl_fft"
    mkl = True
    title = "mkl_fft"
    install = "pip install 'trnplan[mkl]'"
    speed = (0.78, 1.07, 1.0)
    call_excess_us = 2.5
    # mkl_fft 2.3.2 loops over the batch in Python for rfftn/irfftn over some axes, and the c2c
    # per-axis calls stride across the batch: 8 × 256² r2c took 6.1 ms vs torch.fft's 3.7 ms
    # and pyFFTW's 2.5 ms (`make demo`'s second plan was a mis-pick at factor 1)
    nd_batched = 1.8
    #: 3: MKL's fp64 error floor (native.mkl_fp64_floor); 4: the one-thread variant that measured
    #: planning times (MKL's OpenMP count set to 1 for the call); 5: MKL's bound for a single
    #: transform (native.mkl_single)
    version = 5
    prime_slowdown = ((8192, 6.7), (float("inf"), 31.0))


HOST_LIBRARIES = (ScipyFFT(), PyFFTW(), MklFFT())
