"""The cost of an FFT library leaf, and the model of it fitted on this machine.

Every leaf that hands its whole transform to a library — ``native`` (torch.fft), ``real`` and
``nd`` with ``method=lib``, and the host libraries (scipy, pyFFTW, mkl_fft) — is priced here by
:func:`leaf_work`, in one of two ways:

* **uncalibrated**: the constants of the CPU profile and of each solver (measured at the
  profile's ``threads``), plus one assumption for the thread count ``T`` the plan runs at:
  a leaf that runs on torch's threads (torch.fft, mkl_fft; scipy over a batch) changes its
  rate by ``(T / profile.threads) ** THREAD_EXPONENT``; pyFFTW leaves run single-threaded
  (trnplan.kernels.hostlib) and do not change.
* **fitted**: where ``trnplan calibrate`` (:func:`trnplan.tools.calibrate.fit_cpu_model`)
  has timed the leaves on this machine at this thread count, the profile carries a
  :class:`~trnplan.core.cost.LeafCost` per leaf (per-call cost, a rate per size regime, the
  batch gain, the large-prime slowdown) and its held-out error, and the leaf costs what the
  fit says. The record lives in the plan cache under ``leafmodel:<fingerprint digest>:<threads>``
  (read and written by :mod:`trnplan.cache.records`; applied by :func:`fitted_profile`).

Either way the result is a :class:`~trnplan.core.cost.Work` in the profile's library terms
(``fft_calls``, ``fft:<dtype>`` flops), so trees price, print and recalibrate as before.
"""

from __future__ import annotations

import math
import time

import attrs
import numpy as np
import torch

from trnplan.core.cost import LeafCost, Work
from trnplan.planner.solver import prime_factors

#: upper limits of the size regimes of the longest axis, as trnplan.planner.library.SPEED_LIMITS
REGIMES = (256, 8192, math.inf)
#: data beyond this many bytes per call leaves a core's cache (the L2 of the 2-vCPU Xeon here is
#: 2 MiB per core, /sys/devices/system/cpu/cpu0/cache/index2/size); the fit prices the excess
CACHE_BYTES = 2 * 2**20
#: a prime factor up to this size of a composite length may run as a direct O(p²) pass (FFTW's
#: generic codelet, MKL's and pocketfft's generic radix), beyond it by Rader or Bluestein
DIRECT_PRIME = 256
#: primes above this take a library's chirp-z path (trnplan.planner.native.BLUESTEIN_PRIME)
LARGE_PRIME = 50
#: assumed scaling of a threaded leaf's rate with torch's thread count when no fit exists: 0.8
#: (a parallel efficiency of ~87 % at 2 threads); a fit at the running thread count replaces it
THREAD_EXPONENT = 0.8
#: leaves that run on torch's intra-op threads ("batch": only across the batch, as scipy's workers)
THREADED = {"native": "all", "real": "all", "nd": "all", "mkl-fft": "all", "scipy": "batch"}


@attrs.frozen
class LeafShape:
    """What a leaf's cost depends on: flops per transform (smooth part, large-prime part), the
    library's prime slowdown there, the longest axis, the batch and the number of axis passes."""

    smooth: float
    prime_part: float
    slowdown: float
    longest: int
    batch: int
    calls: int = 1
    real: bool = False
    #: flops per transform of a direct O(p²) DFT pass per large prime factor p of a composite length
    direct_part: float = 0.0
    #: bytes of complex64 data on the complex side of one call (the memory term's measure)
    data_bytes: float = 0.0

    @classmethod
    def of(cls, problem, slowdown_table, half: float | None = None, primes: bool = True, calls: int = 1):
        """The leaf shape of ``problem`` (``half``: flop factor, default 0.5 for r2c/c2r)."""
        half = (0.5 if problem.kind != "c2c" else 1.0) if half is None else half
        n = problem.n
        smooth, prime_part, direct, slowdown = half * 5.0 * n * math.log2(max(n, 2)), 0.0, 0.0, 1.0
        for length in problem.shape if primes else ():
            p = max(prime_factors(length), default=1)
            if p > LARGE_PRIME:
                slowdown = next(f for limit, f in slowdown_table if p <= limit)
                prime_part += half * (n // p) * 5.0 * p * math.log2(p)
                direct += half * (n // p) * 8.0 * p * p if length != p and p <= DIRECT_PRIME else 0.0
        data = 8.0 * problem.batch * math.prod(problem.out_shape if problem.kind == "r2c" else problem.in_shape)
        return cls(smooth, prime_part, slowdown, max(problem.shape), problem.batch, calls, problem.kind != "c2c",
                   direct, data)


def regime(longest: int) -> int:
    """Index of the size regime of a longest axis."""
    return next(i for i, limit in enumerate(REGIMES) if longest <= limit)


def leaf_time_us(cost: LeafCost, shape: LeafShape) -> float:
    """The fitted model's time of one leaf call on complex64 data, µs."""
    slow = 1.0 + (shape.slowdown - 1.0) * cost.prime_scale
    flops = shape.smooth + shape.prime_part * slow + shape.direct_part * cost.direct_scale
    flops *= shape.batch * (cost.real_factor / 0.5 if shape.real else 1.0)
    gain = 1.0 + (cost.batch_gain - 1.0) * (1.0 - 1.0 / shape.batch)
    memory = cost.mem_us_per_mb * max(0.0, shape.data_bytes - CACHE_BYTES) / 1e6
    return cost.call_us + flops / (cost.gflops[regime(shape.longest)] * 1e3 * gain) + memory


def thread_factor(leaf: str, profile, batch: int) -> float:
    """Flop multiplier of an uncalibrated leaf at torch's current thread count (see the module doc)."""
    mode = THREADED.get(leaf)
    threads = torch.get_num_threads()
    if mode is None or threads == profile.threads or (mode == "batch" and batch == 1):
        return 1.0
    return (profile.threads / threads) ** THREAD_EXPONENT


def leaf_work(problem, planner, leaf: str, shape: LeafShape, speed: float = 1.0, excess_us: float = 0.0,
              factor: float = 1.0) -> Work:
    """The work of a library call on ``problem`` (packing excluded: trnplan.planner.solver.library_io).

    Uncalibrated: ``shape.calls`` library calls, the nominal flops times ``speed`` (the leaf's
    factor for the regime), ``factor`` and :func:`thread_factor`, and ``excess_us`` per call
    beyond torch.fft's as launches. Fitted (``leaf`` in the profile's ``leaves``): the same terms
    scaled so that the profile prices them at :func:`leaf_time_us` (complex128 at the profile's
    fp64/fp32 rate ratio).
    """
    profile = planner.profile
    fitted = profile.leaves.get(leaf)
    if fitted is None:
        flops = shape.batch * (shape.smooth + shape.prime_part * (shape.slowdown - 1.0))
        flops *= speed * factor * thread_factor(leaf, profile, shape.batch)
        return Work(launches=excess_us / profile.launch_us, fft_calls=shape.calls, fft_flops=flops)
    dtype = str(problem.real_dtype).removeprefix("torch.")
    call = fitted.call_us + (shape.calls - 1) * profile.fft_launch_us
    compute_us = (leaf_time_us(fitted, shape) - fitted.call_us) * factor
    compute_us *= profile.fft_gflops["float32"] / profile.fft_gflops[dtype]
    return Work(fft_calls=call / profile.fft_launch_us, fft_flops=compute_us * profile.fft_gflops[dtype] * 1e3)


# ---------------------------------------------------------------------------- the fit

#: ridge weight pulling each log-parameter towards its prior (the uncalibrated constants)
RIDGE = 0.02
#: log-error beyond which a timing's weight in the fit falls off (soft-L1): 0.5 is a factor 1.65
ROBUST = 0.5


#: the fitted parameters: six log-multipliers of the prior's constants (call, three rates, batch
#: gain, prime slowdown), the log-multiplier of the r2c fraction, the memory term in units of
#: MEM_UNIT µs/MB and the direct prime pass's multiplier (both linear: their prior is 0), each
#: kept within [LOW, HIGH]
PARAMS = 9
MEM_UNIT = 100.0
LOW = np.array([-6.0] * 7 + [0.0, 0.0])
HIGH = np.array([6.0] * 7 + [6.0, 6.0])


def _cost(prior: LeafCost, theta) -> LeafCost:
    g = tuple(r * math.exp(t) for r, t in zip(prior.gflops, theta[1:4]))
    return LeafCost(prior.call_us * math.exp(theta[0]), g, prior.batch_gain * math.exp(theta[4]),
                    prior.prime_scale * math.exp(theta[5]), prior.real_factor * math.exp(theta[6]),
                    float(prior.mem_us_per_mb + MEM_UNIT * theta[7]), float(prior.direct_scale + theta[8]))


def rms_log(cost: LeafCost, samples) -> float:
    """rms of log(predicted / measured) over ``samples``, (LeafShape, measured µs) pairs."""
    if not samples:
        return float("nan")
    r = [math.log(leaf_time_us(cost, s) / t) for s, t in samples]
    return math.sqrt(sum(x * x for x in r) / len(r))


def fit_leaf(samples, prior: LeafCost, ridge: float = RIDGE, robust: float = ROBUST) -> LeafCost:
    """The :class:`LeafCost` that best fits ``samples`` ((LeafShape, measured µs) pairs) in log
    space, ridge-regularised towards ``prior`` (so a regime without samples keeps its prior).

    Levenberg–Marquardt on :data:`PARAMS` parameters (call cost, three rates, batch gain, prime
    slowdown, r2c fraction, memory term, direct prime pass) with a forward-difference Jacobian, numpy only; the squared log-error is softened
    beyond ``robust`` (a soft-L1 loss by reweighting, 0: plain least squares) so that a timing
    caught in a scheduler stall does not drag the rest.
    """
    samples = [(s, t) for s, t in samples if t > 0]
    if not samples:
        return prior
    logt = np.log([t for _, t in samples])
    weights = np.ones(len(samples))
    theta = np.zeros(PARAMS)
    for _ in range(4 if robust else 1):
        theta = _levenberg_marquardt(samples, prior, logt, weights, theta, math.sqrt(ridge))
        if robust:
            r = np.log([leaf_time_us(_cost(prior, theta), s) for s, _ in samples]) - logt
            weights = 1.0 / np.sqrt(np.sqrt(1.0 + (r / robust) ** 2))
    return _cost(prior, theta)


def _levenberg_marquardt(samples, prior, logt, weights, theta, lam):
    def residual(th):
        cost = _cost(prior, th)
        pred = np.log([leaf_time_us(cost, s) for s, _ in samples])
        return np.concatenate([weights * (pred - logt), lam * th])

    mu = 1e-2
    r = residual(theta)
    for _ in range(100):
        jac = np.stack([(residual(theta + 1e-6 * e) - r) / 1e-6 for e in np.eye(PARAMS)], axis=1)
        step = np.linalg.solve(jac.T @ jac + mu * np.eye(PARAMS), -jac.T @ r)
        trial = np.clip(theta + step, LOW, HIGH)
        r_new = residual(trial)
        if r_new @ r_new < r @ r:
            theta, r, mu = trial, r_new, mu / 3
            if np.max(np.abs(step)) < 1e-5:
                break
        else:
            mu *= 10
            if mu > 1e8:
                break
    return theta


# ---------------------------------------------------------------------------- the stored fit

def fit_record(leaves: dict, report: dict, when: float) -> dict:
    """The record of fitted ``leaves`` (name → LeafCost) with the fit's ``report`` (rms_heldout,
    grid …), made at Unix time ``when``; the cache layer stores it (:mod:`trnplan.cache.records`)."""
    return {"leaves": {k: attrs.asdict(v) for k, v in leaves.items()}, "time": when, **report}


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _leaf(fields) -> LeafCost:
    """One stored LeafCost: every field a finite number (rates positive), nothing else."""
    if not isinstance(fields, dict) or not isinstance(fields.get("gflops"), list):
        raise TypeError("a leaf must be a table with a gflops list")
    if not all(_finite(g) and g > 0 for g in fields["gflops"]):
        raise ValueError(f"gflops {fields['gflops']!r} are not positive numbers")
    if not all(_finite(v) and v >= 0 for f, v in fields.items() if f != "gflops"):
        raise ValueError("a leaf's fields must be numbers ≥ 0")
    return LeafCost(**{f: tuple(map(float, x)) if f == "gflops" else float(x) for f, x in fields.items()})


def parse_record(record) -> dict:
    """A stored ``leafmodel:`` record with its leaves as LeafCost; raises if it is not one (the
    plan cache forgets it with a warning: PlanCache.get_record)."""
    leaves = {k: _leaf(v) for k, v in record["leaves"].items()}
    if not (_finite(record["rms_heldout"]) and record["rms_heldout"] >= 0) or not _finite(record.get("time", 0)):
        raise ValueError("rms_heldout / time are not numbers")
    return {**record, "leaves": leaves, "rms_heldout": float(record["rms_heldout"])}


def fitted_profile(profile, record: dict | None, threads: int):
    """``profile`` with the stored leaf fit of this machine at ``threads`` threads (``record``:
    :func:`parse_record`'s result, or None: there is none): its leaves, and the fit's held-out rms as
    the margin rule's sigma for trees of fitted leaves (the profile's own sigma, its uncalibrated
    error, stays for the rest). A profile without library leaves (``fft_gflops``) takes no fit."""
    if not profile.fft_gflops:
        record = None
    if record is None:
        if not profile.sigma_source:  # a profile without a measured error (CUDA): nothing to add
            return profile
        return attrs.evolve(profile, sigma_source=f"{profile.sigma_source}; no fit for this machine at {threads} "
                                                  f"threads (trnplan calibrate)")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(record.get("time", 0)))
    return attrs.evolve(profile, leaves=record["leaves"], sigma_fitted=record["rms_heldout"],
                        sigma_source=(f"fitted {when} at {threads} thread(s), rms log-error on "
                                      f"{len(record.get('heldout', []))} held-out timings; trees with other "
                                      f"solvers: {profile.sigma_source}"))
