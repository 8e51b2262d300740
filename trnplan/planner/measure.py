"""Measured planning: the efforts "measure" and "patient" (FFTW_MEASURE / FFTW_PATIENT).

The cost model guesses; measured planning times. For one problem:

1. :meth:`Planner.enumerate <trnplan.planner.planner.Planner.enumerate>` lists every complete
   tree the solvers try at the top level within the accuracy bound (each solver's variants:
   the library leaves and their thread counts, four-step splits, Bluestein lengths, real and nd
   methods, precision modes …; their children chosen by the model), sorted by predicted time.
2. The timed set: the estimate's pick, the **default** — the device's own FFT
   (:meth:`Planner.default_node <trnplan.planner.planner.Planner.default_node>`: torch.fft on the
   CPU, cuFFT on CUDA; not added under a user's strategy) — and then, in predicted order, the
   cheapest tree of every root solver followed by the rest, up to ``K`` of them
   (:func:`trnplan.core.config.measure_top_k`, default 6, ``TRNPLAN_MEASURE_TOP_K``); "patient"
   times every tree.
3. Each is lowered and run the way :meth:`Plan.execute <trnplan.plan.plan.Plan.execute>` runs it
   on the seeded verification input on the plan's device, at the torch thread count the plan
   will run with: warmed up (its error against float64 numpy.fft measured on that output), then
   timed **round-robin**: in each round every candidate runs ``inner`` calls (grouped so that a
   sample lasts ≥ 50 µs; CUDA synchronised), so drift and a neighbour's load hit all alike, and
   torch's thread pool is as hot between a library's calls as in a workload that mixes them.
4. The decision (:func:`decide`): per candidate the median time, and against the default the
   median of the **paired** per-round ratios with its noise (half the inter-quartile range of
   those ratios, relative, at least :data:`NOISE_FLOOR`). The default is kept unless a candidate
   within the bound measures faster *beyond the noise* (ratio × (1 + noise) < 1); then the one
   with the lowest ratio wins. With no default (xla, neuron, the bf16 modes) the fastest
   within the bound wins. Then :func:`robust_pick` makes the pick hold up on a busy machine:
   every candidate faster than the default by its median (:func:`contenders`) must win in
   bursts separated in time and, with torch threads > 1, also under a background load; the
   confirmed are ranked by their own times; a machine too noisy to settle it keeps the default
   and says so. Every candidate's predicted and measured time, error, noise and ratio
   to the default, the rule applied, the thread count and the time of measurement go into the
   wisdom entry (explain() prints them), so a later ``plan_many`` replays the winner without
   timing — after a cheap spot check (:func:`recheck`) that the winner still beats the default.

The time limit (:func:`trnplan.core.config.set_timelimit`, ``TRNPLAN_TIMELIMIT``; default 5 s for
measure, 30 s for patient) is checked before each candidate is prepared (the estimate's pick and
the default always are) and bounds the rounds (at least :data:`MIN_ROUNDS`). Candidates not
reached are listed as "not timed (time limit)". FFTW's own planning of the candidates' pyFFTW
leaves (FFTW_MEASURE) is not counted in it: it has a budget of its own
(:func:`trnplan.core.config.fftw_timelimit`), because FFTW_MEASURE cut short makes a plan up to
1.8× slower than the one a user's own FFTW_MEASURE call makes.

The measured times also calibrate the cost model (:mod:`trnplan.planner.learn`), and the
result records the *regret* of the estimate: the measured time of the model's pick over the
measured winner's.
"""

from __future__ import annotations

import contextlib
import math
import re
import statistics
import subprocess
import sys
import time

import attrs
import numpy as np
import torch

from trnplan.core import config, timing
from trnplan.core.accuracy import reference, seeded_input
from trnplan.core.cost import format_time
from trnplan.core.errors import PlanningError
from trnplan.core.progress import Progress
from trnplan.core.spec import parse_strategy
from trnplan.core.timing import paired, spread
from trnplan.kernels import hostlib
from trnplan.kernels.hostlib.occupancy import occupancy
from trnplan.kernels.hostlib.threads import BIG_STALL, STALL_MARGIN
from trnplan.planner.planner import CHOSEN, MORE_EXPENSIVE

FASTEST = "fastest"
SLOWER = "slower"
OVER_BOUND_MEASURED = "over the bound (measured)"
NOT_TIMED_LIMIT = "not timed (time limit)"
NOT_TIMED_TOP_K = "not timed (outside the top K)"
#: a top-level candidate whose best tree measured faster than the chosen one by its median, but not
#: beyond the noise the rule asks for (explain()'s candidate list)
NOT_CHOSEN_NOISE = "within the noise"
FAILED = "failed"

#: calls are grouped so that one timed sample lasts at least this long (timer resolution, noise)
MIN_SAMPLE_S = 50e-6
#: per-candidate timing budget (the rounds' share), and the bounds on the round count
CANDIDATE_BUDGET_S = 0.15
MIN_ROUNDS, MAX_ROUNDS = 5, 41
#: after the first rounds, candidates slower than this many times the fastest median are dropped
#: from the rounds (:func:`timed_rounds`)
PRUNE = 2.0
#: the least relative noise a comparison assumes: two identical calls timed round-robin on this
#: 2-vCPU machine differed by up to ~2 % in median (quiet), so a "win" by less is not one
NOISE_FLOOR = 0.02
#: the spot check of a reused measured record (:func:`recheck`): its rounds and time cap
RECHECK_ROUNDS, RECHECK_BUDGET_S = 7, 0.03
#: confirmation (:func:`confirm`) of a candidate that would replace the default: this many bursts of
#: round-robin rounds (each capped at CONFIRM_BURST_S), separated by CONFIRM_GAP_S of sleep, so
#: that one burst of a neighbour's load cannot make the pick; every burst must confirm the win.
#: On the loaded 2-core machine a single burst picked pyFFTW at 0.66× the default in one process
#: and 1.69× in the next (8×16385)
CONFIRM_BURSTS, CONFIRM_ROUNDS, CONFIRM_BURST_S, CONFIRM_GAP_S = 3, 5, 0.08, 0.03
#: the share of the time limit the round-robin rounds leave for the confirmation (its 3 bursts of
#: 5 rounds of two candidates and the loaded burst: ~0.1-0.3 s for calls of 50 µs-2 ms)
CONFIRM_SHARE = 0.1
#: the per-round ratios' statistic of a burst: their lower quartile (a neighbour's load only ever
#: slows a sample, so the low quantile is the least disturbed; the median is kept for explain())
CONFIRM_QUANTILE = 0.25
#: a machine whose rounds scatter more than this (the default's own relative noise, or the median
#: candidate's paired noise) is too busy to measure: the default is kept, the record says so, and
#: the pick is not taken as wisdom
BUSY_NOISE = 0.15
#: a record measured while another process was runnable after at least this share of the rounds
#: (the run queue, :mod:`~trnplan.kernels.hostlib.occupancy`, which the rounds' times can only
#: guess at) is not trusted as wisdom: its pick stands in the process that measured it, and the
#: next process that reuses it measures again (:func:`held_core`). Not a "machine busy" verdict
#: that keeps the default: tried (bench/measure_busy.py, loaded, 2026-11-27), it kept torch.fft at
#: one thread where mkl_fft ran 2.7× faster (1×65537) and at 3.2× mkl_fft's time (4×16385)
BUSY_HELD = 0.5
#: at most this many contenders (besides the default) go into the confirmation bursts
CONFIRM_MAX = 3
#: seconds the background load's interpreter is given to start spinning (-S: ~15 ms here)
LOAD_START_S = 0.05
#: a tree at more threads than one must beat its one-thread alternative by this margin also under
#: load to be kept: a two-thread OpenMP call stalls while another process holds a core (torch.fft
#: 64×1024 took 9.5 ms at 2 threads against 37 µs quiet on this 2-core machine, load 2.3), so on a
#: machine that others share the one-thread leaf is the safe choice unless more threads win clearly
#: in both conditions (issue 32)
LOAD_MARGIN = 0.05


@attrs.frozen
class Timing:
    """One candidate tree of a measured plan.

    Attributes
    ----------
    tree : str
        The tree's s-expression (usable as ``strategy=``).
    solver : str
        Its root solver.
    predicted_us, error : float
        The cost and accuracy models' predictions.
    measured_us, measured_error : float or None
        Median time per call and relative L2 error vs float64 numpy.fft; None when not timed.
    verdict : str
        fastest, slower, over the bound (measured), not timed (time limit / outside the top K),
        or failed (with the reason).
    estimate : bool
        The cost model's own pick (what effort "estimate" would run).
    calls : int
        Calls timed.
    default : bool
        The device's own FFT (what the candidates must beat).
    rounds : int
        Round-robin rounds it was timed in.
    noise : float or None
        Relative noise: of the paired ratios to the default where there is one (half their
        inter-quartile range over their median), else of its own samples.
    vs_default : float or None
        Median of the paired per-round ratios of its time to the default's (None: no default).
    """

    tree: str
    solver: str
    predicted_us: float
    error: float
    measured_us: float | None = None
    measured_error: float | None = None
    verdict: str = ""
    estimate: bool = False
    calls: int = 0
    default: bool = False
    rounds: int = 0
    noise: float | None = None
    vs_default: float | None = None

    def to_dict(self) -> dict:
        return attrs.asdict(self)


@attrs.frozen
class Measurement:
    """What measured planning did for one problem (stored with the wisdom, shown by explain()).

    Attributes
    ----------
    effort : str
        "measure" or "patient".
    timings : tuple of Timing
        Every enumerated candidate, in predicted order.
    enumerated : int
        Candidate trees the planner enumerated.
    top_k : int or None
        How many the effort times by the model's rank (None: all, "patient").
    limit_s, elapsed_s : float
        The time limit and the time spent timing.
    regret : float or None
        Measured time of the estimate's pick over the winner's (1.0: the model was right).
    default_tree : str or None
        The device's own FFT that was timed as the default (None: there is none here).
    threads : int
        torch's thread count while timing (the plan's speed depends on it).
    measured_at : float
        When (Unix time): ``trnplan cache list --measured`` shows the age.
    rule : str
        The decision, in words (explain()).
    confirmation : tuple of float
        Per confirmation burst, the lower-quartile paired ratio of the chosen tree's time to the
        default's (empty: nothing replaced the default, so nothing needed confirming).
    under_load : float or None
        The chosen tree's paired ratio to the default while a background process kept one core
        busy (None: not checked; only a tree that replaced the default with torch threads > 1 is).
    busy : float or None
        The noise that made the machine too busy to measure (the default was kept), else None.
    checks : tuple of (str, tuple of float, float, float or None, float, float or None)
        Per contender that went into the confirmation (faster than the default by the median):
        its tree, its per-burst lower-quartile ratios to the default, the noise of its per-round
        ratios over the bursts, its ratio under load (None: not timed under load), and its own
        lower-quartile time in µs quiet and under load (what ranks the confirmed contenders).
    default_threads : tuple of (str, str, float, float or None, str)
        The default's thread count (:func:`default_threads`), where torch threads > 1 on the CPU:
        the multi-thread default, its one-thread twin, the multi-thread one's paired ratio to the
        twin quiet and under load (median per-round ratios; None: not timed under load), and the
        tree kept as the default. Empty: not decided (one thread, or not the CPU).
    held : tuple of (int, int)
        The run queue over the rounds (:func:`watch_rounds`): after how many of them another
        process was runnable, and how many were watched. Empty: not watched (not the CPU, or no
        run queue that describes this process's cores).
    adaptive : tuple of (str, str, float, float, bool)
        Where the pick was a one-thread library leaf whose multi-thread twin ran faster in the
        quiet rounds (:func:`adaptive_pick`): the adaptive tree (``threads=k adapt=T1``), the
        one-thread tree, the one-thread time T1 and the multi-thread time in µs (lower quartiles
        of the rounds), and whether both gave bitwise identical output (False: the one-thread
        leaf was kept). Empty: no such twin.
    fftw_s : float
        Seconds FFTW's own planner spent on the candidates' pyFFTW leaves (FFTW_MEASURE, its budget
        :func:`trnplan.core.config.fftw_timelimit`), within ``elapsed_s`` but not counted in the
        time limit.
    """

    effort: str
    timings: tuple
    enumerated: int
    top_k: int | None
    limit_s: float
    elapsed_s: float
    regret: float | None
    default_tree: str | None = None
    threads: int = 0
    measured_at: float = 0.0
    rule: str = ""
    confirmation: tuple = ()
    under_load: float | None = None
    busy: float | None = None
    checks: tuple = ()
    default_threads: tuple = ()
    adaptive: tuple = ()
    held: tuple = ()
    fftw_s: float = 0.0

    @property
    def winner(self) -> Timing:
        return next(t for t in self.timings if t.verdict == FASTEST)

    def age_s(self, now: float | None = None) -> float | None:
        """Seconds since it was measured (None: a record from before the time was kept)."""
        if not self.measured_at:
            return None
        return (time.time() if now is None else now) - self.measured_at

    @property
    def noise(self) -> float | None:
        """The winner's noise (explain(), the cache listing)."""
        return self.winner.noise

    def to_dict(self) -> dict:
        out = attrs.asdict(self, recurse=False)
        out["timings"] = [t.to_dict() for t in self.timings]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Measurement:
        """A stored measurement (records written before the round-robin timing load with no
        noise, default or time of measurement)."""
        timings = tuple(Timing(**t) for t in data["timings"])
        if not any(t.verdict == FASTEST for t in timings):
            raise ValueError("a measurement record without a winner")
        load, busy = data.get("under_load"), data.get("busy")
        return cls(data["effort"], timings, int(data["enumerated"]), data.get("top_k"), float(data["limit_s"]),
                   float(data["elapsed_s"]), data.get("regret"), data.get("default_tree"),
                   int(data.get("threads", 0)), float(data.get("measured_at", 0.0)), data.get("rule", ""),
                   tuple(float(r) for r in data.get("confirmation", ())),
                   None if load is None else float(load), None if busy is None else float(busy),
                   tuple(_check(c) for c in data.get("checks", ())), _default_threads(data.get("default_threads")),
                   _adaptive(data.get("adaptive")), tuple(int(v) for v in data.get("held") or ()),
                   float(data.get("fftw_s", 0.0)))


def _adaptive(d) -> tuple:
    """A stored ``Measurement.adaptive`` as a tuple (JSON gives a list; absent: empty)."""
    if not d:
        return ()
    return str(d[0]), str(d[1]), float(d[2]), float(d[3]), bool(d[4])


def _default_threads(d) -> tuple:
    """A stored ``Measurement.default_threads`` as a tuple (JSON gives a list; absent: empty)."""
    if not d:
        return ()
    return str(d[0]), str(d[1]), float(d[2]), None if d[3] is None else float(d[3]), str(d[4])


def _check(c) -> tuple:
    """One stored ``Measurement.checks`` entry as a tuple (JSON gives lists)."""
    def opt(v):
        return None if v is None else float(v)

    c = list(c) + [None] * (6 - len(c))
    return str(c[0]), tuple(float(r) for r in c[1]), float(c[2]), opt(c[3]), opt(c[4]), opt(c[5])


def _sync(device: torch.device):
    # the plan's GPU: torch.cuda.synchronize() alone waits for the current device, so a plan on
    # cuda:1 would be timed by its launches only
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)


class _Readback:
    """The sync of a device timed through the split form (a NeuronCore): the last call's outputs
    read to the host. TorchNeuron queues ops asynchronously, and ``.cpu()`` is the documented way to
    wait for them (runtimes.md §2, "Eager mode"); no device synchronize is documented. Every
    candidate of a problem returns outputs of the same size, so the readback adds the same transfer
    to each sample (one per ``inner`` calls), not to one candidate more than another."""

    def __init__(self):
        self.out = None

    def wrap(self, fn):
        def call():
            self.out = fn()
            return self.out

        return call

    def __call__(self):
        out, self.out = self.out, None
        for t in out if isinstance(out, tuple) else (() if out is None else (out,)):
            t.cpu()


def _split_form(planner, device: torch.device) -> bool:
    """Whether candidates are timed through the split ``(re, im)`` form: where complex tensors may
    not cross a plan's boundary on ``device`` (a NeuronCore: runtimes.md rule 1)."""
    return not planner.backend.boundary(device).complex


def _call(plan, x, sync):
    """The call measured planning times: ``plan.run(x)``, or in the split form (``sync`` a
    :class:`_Readback`) ``plan.execute_split(x)``, its outputs kept for the sync to read back."""
    if isinstance(sync, _Readback):
        return sync.wrap(lambda: plan.execute_split(x))
    return lambda: plan.run(x)


def _host_numpy(y) -> np.ndarray:
    """A candidate's output on the host as numpy: a split ``(re, im)`` pair packed there, never on
    the device."""
    if isinstance(y, tuple):
        re, im = (t.detach().cpu() for t in y)
        return torch.complex(re, im).numpy()
    return y.detach().cpu().numpy()


def time_call(fn, device: torch.device, budget_s: float):
    """(median µs per call, calls made, the warm-up call's result) of ``fn()`` alone, within about
    ``budget_s`` (at least 3 timed repeats). Measured planning times candidates together
    (:func:`round_robin`); this times one callable (benchmarks, verification)."""
    sync = _sync(device)
    out = fn()
    sync()
    inner, first = _inner(fn, sync)
    repeats = int(min(MAX_ROUNDS * 5, max(3, budget_s / (first * inner))))
    samples = round_robin([(fn, inner)], sync, repeats)[0]
    return statistics.median(samples) * 1e6, repeats * inner + 2, out


def _inner(fn, sync) -> tuple[int, float]:
    """(calls per sample so that one lasts ≥ MIN_SAMPLE_S, seconds of one call), after a warm call."""
    return timing.calls_per_sample(fn, sync, MIN_SAMPLE_S)


def round_robin(runners, sync, rounds: int, stop_s: float | None = None, each_round=None) -> list[list[float]]:
    """:func:`trnplan.core.timing.round_robin` (each runner an untimed call, then ``inner`` timed
    ones, in turn, one sample per round) that stops early only after :data:`MIN_ROUNDS` rounds."""
    return timing.round_robin(runners, sync, rounds, stop_s, min_rounds=MIN_ROUNDS, each_round=each_round)


def watch_rounds(device: torch.device) -> tuple:
    """(a callable for :func:`round_robin`'s ``each_round``, the list it fills): after each round,
    whether another process is runnable (:meth:`~trnplan.kernels.hostlib.occupancy.Occupancy.others`,
    ~20-40 µs, outside the timed calls). (None, []) off the CPU or where this machine's run queue
    does not describe this process's cores."""
    occ = occupancy() if device.type == "cpu" else None
    flags: list = []
    if occ is None:
        return None, flags

    def ask():
        try:
            flags.append(occ.others() > 0)
        except (OSError, ValueError, IndexError):  # /proc unreadable this time: that round not counted
            pass

    return ask, flags


def timed_rounds(runners, sync, rounds: int, budget_s: float, keep, each_round=None) -> list[list[float]]:
    """:func:`round_robin` in two phases: :data:`MIN_ROUNDS` rounds of every runner, then the
    remaining rounds of those within :data:`PRUNE` × the fastest median so far (and those ``keep``
    marks). A candidate many times slower is then no longer timed: its calls evicted the others'
    caches and stirred the allocator between their calls (a dft-gemm 192 in the rounds made the
    pyFFTW leaf of 512×192 measure 100 µs where a loop of it runs 53), which a plan called in a
    loop never sees. The pruned keep their first rounds' samples (paired with the default's first)."""
    start = time.perf_counter()
    first = round_robin(runners, sync, min(MIN_ROUNDS, rounds), each_round=each_round)
    best = min(statistics.median(s) for s in first)
    alive = [i for i, s in enumerate(first) if keep[i] or statistics.median(s) <= PRUNE * best]
    rest = max(rounds - MIN_ROUNDS, 0)
    if rest and alive:
        left = max(budget_s - (time.perf_counter() - start), 0.0)
        more = round_robin([runners[i] for i in alive], sync, rest, stop_s=left, each_round=each_round)
        for i, extra in zip(alive, more):
            first[i].extend(extra)
    return first


def beats_default(vs_default: float, noise: float) -> bool:
    """Whether a candidate whose paired ratio to the default is ``vs_default`` (with relative
    ``noise``) is faster beyond the noise: ``vs_default · (1 + max(noise, NOISE_FLOOR)) < 1``."""
    return vs_default * (1.0 + max(noise, NOISE_FLOOR)) < 1.0


def decide(timings: list) -> tuple[Timing, str]:
    """The winner among timed ``timings`` (verdict SLOWER: within the bound) and the rule, in words.

    The default is kept unless a candidate beats it beyond the noise (:func:`beats_default`);
    then the lowest paired ratio wins. Without a default within the bound, the fastest median.
    """
    ok = [t for t in timings if t.verdict == SLOWER]
    default = next((t for t in ok if t.default), None)
    if default is None:
        best = min(ok, key=lambda t: t.measured_us)
        return best, "no default within the bound here: the fastest median within the bound wins"
    beating = [t for t in ok if not t.default and beats_default(t.vs_default, t.noise or 0.0)]
    if not beating:
        return default, (f"the default {default.tree} kept: no candidate measured faster beyond the noise "
                         f"(paired ratio × (1 + max(noise, {NOISE_FLOOR:g})) < 1)")
    best = min(beating, key=lambda t: t.vs_default)
    return best, (f"{best.tree} replaces the default {default.tree}: {best.vs_default:.2f}× its time per "
                  f"round (noise {best.noise or 0.0:.1%}), beyond the noise")


def low_quantile(values) -> float:
    """The lower quartile of ``values`` (:data:`CONFIRM_QUANTILE`; the value itself for one)."""
    values = list(values)
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=4, method="inclusive")[0]


def bursts(runners, sync, count: int, rounds: int, burst_s: float, gap_s: float) -> list[list[list[float]]]:
    """``count`` round-robin bursts of ``runners`` (:func:`round_robin`, ``rounds`` rounds, stopped
    after ``burst_s``), ``gap_s`` of sleep apart: the samples of each burst."""
    out = []
    for b in range(count):
        if b:
            time.sleep(gap_s)  # separated in time: one burst of a neighbour's load hits one burst
        out.append(round_robin(runners, sync, rounds, stop_s=burst_s))
    return out


def burst_ratios(samples: list[list[list[float]]], i: int) -> list[float]:
    """Per burst, the lower-quartile paired ratio of runner ``i``'s time to runner 0's."""
    return [low_quantile([a / b for a, b in zip(burst[i], burst[0])]) for burst in samples]


#: the background load's program: it spins until its parent is gone, so a planning process killed
#: (SIGKILL, no ``finally``) leaves no spinner behind; getppid() is a system call of well under a
#: microsecond, and the loop still holds its core
SPINNER = "import os\np = os.getppid()\nwhile os.getppid() == p: pass"


@contextlib.contextmanager
def background_load():
    """A process that keeps one core busy for the block (a spinning interpreter, killed after).

    Yields False where none could be started (then nothing is loaded). Where the run queue
    (:func:`~trnplan.kernels.hostlib.occupancy.occupancy`) already shows another process
    runnable, none is started (and True is yielded): the machine is loaded already, and a second
    spinner on a 2-core machine leaves no core free for even a one-thread call — it made pyFFTW's
    two threads at 16×4099 look stalled to planning and scipy's one worker the pick, 1.48× pyFFTW's
    two threads once timed beside the one real spinner (bench/measure_busy.py, 2026-11-27)."""
    occ = occupancy()
    try:
        held = occ is not None and occ.others() > 0
    except (OSError, ValueError, IndexError):  # /proc unreadable this time: start one, as without it
        held = False
    if held:
        yield True
        return
    try:
        proc = subprocess.Popen([sys.executable, "-S", "-c", SPINNER], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        yield False
        return
    try:
        time.sleep(LOAD_START_S)  # the interpreter's start-up, then it spins
        yield True
    finally:
        proc.kill()
        proc.wait()


def busy_noise(default_samples: list[float] | None, timings: list | None = None) -> float | None:
    """The noise that marks the machine too busy to measure before any confirmation (>
    :data:`BUSY_NOISE`), else None: the default's own relative spread over its rounds. The
    candidates' paired noise is not judged here: a slow or load-sensitive candidate's scatter says
    nothing about the default's choice (:func:`contenders`), and the contenders' own is judged over
    the confirmation bursts (:func:`robust_pick`). ``timings`` is accepted and unused (the old
    signature)."""
    if default_samples is None:
        return None
    noise = spread(default_samples)
    return noise if noise > BUSY_NOISE else None


def _timed_set(trees: list, top_k: int | None, n_fixed: int) -> list[bool]:
    """Which of ``trees`` (the fixed ones first, then by predicted time) are timed: the fixed,
    then the cheapest of every root solver, then the rest, ``top_k`` beyond the fixed in all."""
    if top_k is None:
        return [True] * len(trees)
    rest = list(range(n_fixed, len(trees)))
    seen: set = set()
    firsts = [i for i in rest if not (trees[i].solver in seen or seen.add(trees[i].solver))]
    order = firsts + [i for i in rest if i not in firsts]
    chosen = set(range(n_fixed)) | set(order[:top_k])
    # a leaf's other thread count with it (not counted in top_k): which count holds up under load
    # is what the rules decide (default_threads, robust_pick), so neither is left untimed
    twins = {_threadless(str(trees[i])) for i in chosen}
    return [i in chosen or _threadless(str(t)) in twins for i, t in enumerate(trees)]


def _threadless(tree: str) -> str:
    """A tree's text without its leaves' thread counts (``(pyfftw 1024 threads=2)`` → ``(pyfftw 1024)``)."""
    return re.sub(r" threads=\d+", "", tree)


def one_thread_twin(default, problem):
    """The default's one-thread twin (torch.fft at one thread: ``(native n threads=1)``) where
    torch runs more threads on the CPU and the default is torch.fft at torch's count; else None.
    Both are always timed, and :func:`default_threads` decides which one is the default."""
    if (default is None or problem.device != "cpu" or torch.get_num_threads() < 2 or default.solver != "native"
            or default.param("threads") is not None):
        return None
    return attrs.evolve(default, params=(*default.params, ("threads", 1)))


def _candidates(planner, problem, spec, estimate_node) -> tuple[list, object, int]:
    """(trees: the estimate's pick, the default, its one-thread twin, then the enumeration by
    predicted time; the default node or None; how many trees lead the list that are always timed)."""
    default = planner.default_node(problem) if spec is None else None
    fixed = [estimate_node]
    for node in (default, one_thread_twin(default, problem)):
        if node is not None and node.digest() not in {t.digest() for t in fixed}:
            fixed.append(node)
    digests = {t.digest() for t in fixed}
    rest = [t for t in planner.enumerate(problem, spec) if t.digest() not in digests]
    return fixed + rest, default, len(fixed)


@attrs.define
class _Prepared:
    """A candidate ready to time: its call, calls per sample, and its measured error."""

    index: int
    fn: object
    inner: int
    error: float
    call_s: float = 0.0  # one warm call's seconds: a round costs (inner + 1) of them

    @property
    def round_s(self) -> float:
        return (self.inner + 1) * self.call_s


def _prepare(planner, problem, device, tree, make_plan, x, ref, ref_norm, sync) -> _Prepared:
    """Lower ``tree``, warm it up on the seeded input, measure its error and its calls per sample."""
    module = planner.lower_plan(tree, problem, device)
    fn = _call(make_plan(tree, module), x, sync)
    with torch.no_grad():
        y = fn()
        sync()
        inner, call_s = _inner(fn, sync)
    y = _host_numpy(y)
    err = float(np.linalg.norm(y.astype(ref.dtype) - ref) / ref_norm)
    return _Prepared(-1, fn, inner, err, call_s)


def _seeded(problem, device, split: bool = False):
    """(input on the device, float64 reference, its norm) of the seeded verification problem; with
    ``split`` the input is what ``execute_split`` takes (a complex one split on the host, then moved)."""
    x64 = seeded_input(problem)
    ref = reference(problem, x64)
    if split and not problem.real_input:
        x = tuple(torch.from_numpy(np.ascontiguousarray(part)).to(problem.real_dtype).to(device)
                  for part in (x64.real, x64.imag))
        return x, ref, float(np.linalg.norm(ref)) or 1.0
    dtype = problem.real_dtype if problem.real_input else problem.torch_dtype
    x = torch.from_numpy(x64).to(dtype=dtype).to(device)  # cast on the host: no complex128 on a device
    return x, ref, float(np.linalg.norm(ref)) or 1.0


def _prepare_all(planner, problem, device, trees, timed, n_fixed, make_plan, limit, start, bar=None, split=False,
                 fftw=None):
    """Prepare the timed candidates within the time limit: (prepared list, verdicts by index).

    The limit covers preparing (lowering, the warm-up and error check; not FFTW's own planning
    of pyFFTW leaves, which has its budget ``fftw``, :func:`~trnplan.kernels.hostlib.fftw_budget`,
    whose ``spent`` seconds are taken off the clock) *and* the :data:`MIN_ROUNDS` rounds every prepared candidate is then
    timed in, so a candidate is prepared only while the time spent plus the prepared ones' minimum
    rounds leave room, and one whose rounds would no longer fit is dropped (the default 5 s ran
    7.4 s at a 2 s limit before: five candidates' five rounds came after the limit, busy machine).
    The estimate's pick and the default are always timed: a limit shorter than their preparing and
    minimum rounds is overrun by those.
    """
    x, ref, ref_norm = _seeded(problem, device, split)
    sync = _Readback() if split else _sync(device)
    prepared, verdicts, took = [], {}, []

    def fftw_s() -> float:
        return fftw.spent if fftw is not None else 0.0

    def over(extra: float = 0.0, preparing: float = 0.0) -> bool:
        reserved = MIN_ROUNDS * (sum(p.round_s for p in prepared) + extra)
        return time.perf_counter() - start - fftw_s() + preparing + reserved >= limit

    for i, tree in enumerate(trees):
        if not timed[i]:
            verdicts[i] = NOT_TIMED_TOP_K
            continue
        # before preparing: its preparing (as long as the median one so far) and its predicted rounds
        # (one untimed and one timed call each) must fit too
        if i >= n_fixed and over(2e-6 * tree.time_us, statistics.median(took) if took else 0.0):
            verdicts[i] = NOT_TIMED_LIMIT
            continue
        t0, f0 = time.perf_counter(), fftw_s()
        try:
            with torch.no_grad():
                p = _prepare(planner, problem, device, tree, make_plan, x, ref, ref_norm, sync)
        except Exception as exc:  # noqa: BLE001 - a candidate that cannot run here is skipped, with the reason
            verdicts[i] = f"{FAILED}: {type(exc).__name__}: {exc}"[:300]
            continue
        finally:  # its own preparing, without FFTW's planning (the clock leaves that out too)
            took.append(time.perf_counter() - t0 - (fftw_s() - f0))
        if i >= n_fixed and over(p.round_s):  # its rounds no longer fit: not timed
            verdicts[i] = NOT_TIMED_LIMIT
            continue
        prepared.append(attrs.evolve(p, index=i))
        if bar is not None:
            bar.update((time.perf_counter() - start - fftw_s()) / limit,
                       f"{len(prepared)} of {sum(timed)} candidate(s) prepared")
    return prepared, verdicts, sync


def _timings(trees, prepared, samples, verdicts, default_i, tol) -> list:
    """The Timing of every tree from its samples (paired with the default's where there is one)."""
    by_index = {p.index: (p, s) for p, s in zip(prepared, samples)}
    base = by_index.get(default_i, (None, None))[1]
    out = []
    for i, tree in enumerate(trees):
        common = {"tree": str(tree), "solver": tree.solver, "predicted_us": tree.time_us, "error": tree.error,
                  "estimate": i == 0, "default": i == default_i}
        if i not in by_index:
            out.append(Timing(**common, verdict=verdicts[i]))
            continue
        p, s = by_index[i]
        vs, noise = paired(s, base) if base is not None else (None, spread(s))
        out.append(Timing(**common, measured_us=statistics.median(s) * 1e6, measured_error=p.error,
                          verdict=SLOWER if p.error <= tol else OVER_BOUND_MEASURED,  # also rejects NaN
                          calls=len(s) * p.inner + 2, rounds=len(s), noise=noise, vs_default=vs))
    return out


@attrs.frozen
class _Pick:
    """The decision after the robustness rules: the chosen Timing, the rule and its figures."""

    best: Timing
    rule: str
    confirmation: tuple = ()
    under_load: float | None = None
    busy: float | None = None
    checks: tuple = ()


def contenders(timings: list) -> list:
    """The candidates that may replace the default, best first (at most :data:`CONFIRM_MAX`): within
    the bound and faster than the default by their median paired ratio beyond :data:`NOISE_FLOOR`,
    whether or not beyond their own noise (that is what the confirmation decides). A candidate
    slower than the default cannot change the decision, however noisy its rounds: on a quiet
    machine a dft-gemm 20× slower and the 2-thread pyFFTW variant (35 % paired noise) lifted the
    median noise of all candidates over :data:`BUSY_NOISE`, and the default was kept although
    mkl_fft ran 0.77× its time (512×192).

    With torch threads > 1 the one-thread candidates (:func:`tree_threads`) and the multi-thread
    ones are chosen apart: up to :data:`CONFIRM_MAX` one-thread ones and the best multi-thread
    one. Ranked together, the 2-thread variants' ratios (fast in the quiet rounds) filled every
    place, stalled in the bursts, and the one-thread leaf that the bench found fastest (pyFFTW at
    16×4099) was never confirmed (a loaded 2-core run, 2026-11-27)."""
    ok = sorted((t for t in timings if t.verdict == SLOWER and not t.default and t.vs_default is not None
                 and t.vs_default * (1 + NOISE_FLOOR) < 1), key=lambda t: t.vs_default)
    if torch.get_num_threads() < 2:
        return ok[:CONFIRM_MAX]
    one = [t for t in ok if tree_threads(t.tree) == 1][:CONFIRM_MAX]
    multi = [t for t in ok if tree_threads(t.tree) > 1][:1]
    return sorted(one + multi, key=lambda t: t.vs_default)


def _own_time(samples: list[list[list[float]]], i: int) -> float:
    """Runner ``i``'s own time over bursts: the median over the bursts of its lower-quartile sample."""
    return statistics.median(low_quantile(burst[i]) for burst in samples)


def _confirm(cands: list, fns: dict, default: Timing, sync) -> dict:
    """Per contender, its lower-quartile paired ratio to the default in each of
    :data:`CONFIRM_BURSTS` bursts separated in time, the relative noise of its per-round ratios
    over all bursts, and its own time (:func:`_own_time`, seconds):
    ``{tree: (burst ratios, noise, seconds)}``."""
    runners = [fns[default.tree]] + [fns[t.tree] for t in cands]
    with torch.no_grad():
        samples = bursts(runners, sync, CONFIRM_BURSTS, CONFIRM_ROUNDS, CONFIRM_BURST_S, CONFIRM_GAP_S)
    out = {}
    for i, t in enumerate(cands, start=1):
        pooled = [a / b for burst in samples for a, b in zip(burst[i], burst[0])]
        out[t.tree] = (tuple(burst_ratios(samples, i)), spread(pooled), _own_time(samples, i))
    return out


def _under_load(cands: list, fns: dict, default: Timing, sync) -> dict:
    """Per contender, its median paired ratio to the default and its own median time (seconds)
    while another process keeps a core busy: ``{tree: (ratio, seconds)}`` (empty where no load
    could be started). The median, not the lower quartile the quiet bursts use: under load the
    stalls of a multi-thread call are what is measured, and a low quantile would pick the rounds
    that escaped them."""
    burst = loaded_burst([fns[default.tree]] + [fns[t.tree] for t in cands], sync)
    if burst is None:
        return {}
    return {t.tree: (statistics.median(a / b for a, b in zip(burst[i], burst[0])), statistics.median(burst[i]))
            for i, t in enumerate(cands, start=1)}


def loaded_burst(runners, sync) -> list[list[float]] | None:
    """One round-robin burst of ``runners`` (:func:`bursts`: :data:`CONFIRM_ROUNDS` rounds, at most
    :data:`CONFIRM_BURST_S`) while another process keeps a core busy (:func:`background_load`):
    each runner's samples (seconds per call), or None where no load could be started. The load
    test of the default's threads, of the contenders and of the adaptive contest."""
    with background_load() as on:
        if not on:
            return None
        with torch.no_grad():
            return bursts(runners, sync, 1, CONFIRM_ROUNDS, CONFIRM_BURST_S, 0.0)[0]


def _wins(ratio: float) -> bool:
    return ratio * (1 + NOISE_FLOOR) < 1


def _load_pick(confirmed: list, ratios: dict, loaded: dict) -> tuple:
    """(the confirmed contender that also beats the default under load with the lowest mean of its
    own quiet and loaded times, or None; the contenders that lost to the default under load).

    The contenders are ranked by their own times (all timed in the same bursts), not by their
    ratios to the default: where torch.fft's two OpenMP threads stall on a loaded machine its
    samples swing 100× from round to round (0.01×–1.0× in one 64×1024 confirmation), and a
    ratio to it ranks the contenders by which rounds the default stalled in (scipy 1024 was
    chosen at 8× mkl_fft's time)."""
    lost = [t for t in confirmed if t.tree in loaded and not _wins(loaded[t.tree][0])]
    ok = [t for t in confirmed if t not in lost]
    if not ok:
        return None, lost

    def expected(t):  # the load on for half the time: the mean of the two conditions
        quiet = ratios[t.tree][2]
        return (quiet + loaded.get(t.tree, (None, quiet))[1]) / 2

    best = min(ok, key=expected)
    single = [t for t in ok if tree_threads(t.tree) == 1]
    if tree_threads(best.tree) > 1 and single and best.tree in loaded:
        # more threads only where they win clearly also under load: the one-thread alternative's
        # loaded time over LOAD_MARGIN more than the multi-thread one's (issue 32's rule)
        alt = min(single, key=expected)
        if alt.tree in loaded and not loaded[best.tree][1] * (1 + LOAD_MARGIN) < loaded[alt.tree][1]:
            best = alt
    return best, lost


#: the leaves that call a host library at an explicit or implicit thread count, and whether
#: their implicit count is one (pyFFTW) rather than torch's
_THREADED_LEAVES = {"native": False, "mkl-fft": False, "scipy": False, "pyfftw": True}


def tree_threads(tree: str) -> int:
    """The threads a tree's call runs at, from its text: a library leaf's ``threads=k``, else its
    implicit count (pyFFTW one, torch.fft/mkl_fft/scipy torch's); any other tree torch's count
    (its torch ops run on torch's intra-op pool)."""
    m = re.fullmatch(r"\(([a-z-]+) [^()]*\)", tree)
    if m is None or m.group(1) not in _THREADED_LEAVES:
        return torch.get_num_threads()
    k = re.search(r" threads=(\d+)", tree)
    if k is not None:
        return int(k.group(1))
    return 1 if _THREADED_LEAVES[m.group(1)] else torch.get_num_threads()


def robust_pick(timings: list, fns: dict, default_samples, device: torch.device, sync) -> _Pick:
    """:func:`decide`, then the rules that make a pick hold up on a busy machine.

    1. The default's own samples scatter over :data:`BUSY_NOISE` (:func:`busy_noise`) and no
       candidate is faster than the default beyond that scatter: too busy to measure, the default
       is kept and the record says so. A candidate faster beyond it still goes on to the
       confirmation: with torch's 2 threads on a 2-core machine that others load, the default
       itself is what the load hurts most (torch.fft 512×192 measured 6.1 ms in the rounds,
       0.2× that for mkl_fft, 31 µs quiet), so keeping it is the worst pick there.
    2. Every :func:`contenders` (faster than the default by the median, within the noise or
       beyond it) is timed against the default in :data:`CONFIRM_BURSTS` bursts separated in time;
       it is confirmed when every burst's lower-quartile ratio beats the default beyond
       :data:`NOISE_FLOOR`. None confirmed: the default is kept, and marked busy when the
       contenders' per-round ratios over the bursts scatter over :data:`BUSY_NOISE`.
    3. With torch threads > 1 on the CPU the confirmed are timed again while another process
       keeps one core busy; one that loses to the default there is out, and of the rest the one
       with the lowest mean of its quiet and loaded ratios wins (a 2-thread variant that wins
       quietly but stalls under load gives way to a one-thread leaf that wins in both) — a
       multi-thread one only if its own time under load also beats the best one-thread
       contender's by :data:`LOAD_MARGIN` (:func:`tree_threads`); else that one-thread leaf.

    ``fns`` maps each timed tree's text to its ``(fn, inner)``."""
    best, rule = decide(timings)
    default = next((t for t in timings if t.default and t.verdict == SLOWER), None)
    if default is None:
        return _Pick(best, rule)
    noise, cands = busy_noise(default_samples, timings), contenders(timings)
    if noise is not None and not any(t.vs_default * (1 + noise) < 1 for t in cands):
        return _Pick(default, f"not measured: machine busy (noise {noise:.0%} > {BUSY_NOISE:.0%}, the default's own "
                              f"rounds, and no candidate faster beyond it): the default {default.tree} kept, and "
                              f"measured again on the next use", busy=noise)
    if not cands:
        return _Pick(best, rule)
    ratios = _confirm(cands, fns, default, sync)
    confirmed = [t for t in cands if all(_wins(r) for r in ratios[t.tree][0])]
    loaded = {}
    if confirmed and device.type == "cpu" and torch.get_num_threads() > 1:
        loaded = _under_load(confirmed, fns, default, sync)
    chosen, lost = _load_pick(confirmed, ratios, loaded)
    checks = tuple((t.tree, ratios[t.tree][0], ratios[t.tree][1], loaded[t.tree][0] if t.tree in loaded else None,
                    ratios[t.tree][2] * 1e6, loaded[t.tree][1] * 1e6 if t.tree in loaded else None) for t in cands)
    return _verdict(chosen, default, cands, ratios, lost, loaded, checks)


def _verdict(chosen, default, cands, ratios, lost, loaded, checks) -> _Pick:
    """robust_pick's result and its rule in words, from the confirmation and load figures."""
    gap = f"{CONFIRM_BURSTS} bursts {CONFIRM_GAP_S * 1e3:.0f} ms apart"

    def shown(t):
        return ", ".join(f"{r:.2f}×" for r in ratios[t.tree][0])

    if chosen is not None:
        return _Pick(chosen, f"{chosen.tree} replaces the default {default.tree}: confirmed in {gap} ({shown(chosen)} "
                             f"its time, lower-quartile per-round ratio)"
                             + (f", {loaded[chosen.tree][0]:.2f}× while another process kept a core busy"
                                if chosen.tree in loaded else "")
                             + (f"; of {len(checks)} contenders the lowest mean of its own quiet and loaded times"
                                if len(checks) > 1 else ""),
                     confirmation=ratios[chosen.tree][0],
                     under_load=loaded[chosen.tree][0] if chosen.tree in loaded else None, checks=checks)
    if lost:
        t = lost[0]
        return _Pick(default, f"the default {default.tree} kept: {t.tree} won on a quiet core ({shown(t)}) but "
                              f"measured {loaded[t.tree][0]:.2f}× the default while another process kept a core busy",
                     confirmation=ratios[t.tree][0], under_load=loaded[t.tree][0], checks=checks)
    first = cands[0]
    # the machine is judged by the one-thread contenders where there are any: a 2-thread one's
    # scatter is its own stalls (its load sensitivity, judged by the load test), not noise that
    # makes the one-thread leaves' comparison unreliable
    judged = [t for t in cands if tree_threads(t.tree) == 1] or cands
    noise = statistics.median(ratios[t.tree][1] for t in judged)
    why = f"{first.tree} was not confirmed in {gap} ({shown(first)} the default)"
    if noise > BUSY_NOISE:
        return _Pick(default, f"not measured: machine busy (noise {noise:.0%} > {BUSY_NOISE:.0%} over the confirmation "
                              f"bursts): the default {default.tree} kept: {why}", confirmation=ratios[first.tree][0],
                     busy=noise, checks=checks)
    return _Pick(default, f"the default {default.tree} kept: {why}", confirmation=ratios[first.tree][0], checks=checks)


def measure(planner, problem, spec, device: torch.device, effort: str, estimate_node, make_plan):
    """Time the candidates of ``problem`` round-robin and return (winner node, Measurement, samples).

    Parameters
    ----------
    planner : Planner
        Enumerates and lowers the candidates.
    problem, spec
        The problem and the (optional) strategy that restricts the candidates.
    device : torch.device
        Where the candidates run.
    effort : {"measure", "patient"}
    estimate_node : PlanNode
        The cost model's pick (always timed).
    make_plan : callable
        ``make_plan(tree, module)`` → an object with ``run(x)`` that runs the tree as a Plan does.

    Returns
    -------
    (PlanNode, Measurement, list of (terms, measured µs))
        The winner (with ``measured_us`` and ``measured_error`` set), the record, and the samples
        for the cost model's calibration.

    Raises
    ------
    PlanningError
        No timed candidate measured within the accuracy bound.
    """
    tol, limit = planner.tol(problem), config.timelimit(effort)
    top_k = None if effort == "patient" else config.measure_top_k()
    trees, default, n_fixed = _candidates(planner, problem, spec, estimate_node)
    default_i = _index(trees, default)
    twin_i = _index(trees, one_thread_twin(default, problem))
    start = time.perf_counter()
    with Progress(f"measuring (time limit {limit:g} s)") as bar:
        with hostlib.fftw_budget(config.fftw_timelimit(effort)) as fftw:
            prepared, verdicts, sync = _prepare_all(planner, problem, device, trees, _timed_set(trees, top_k, n_fixed),
                                                    n_fixed, make_plan, limit, start, bar, _split_form(planner, device),
                                                    fftw)
        clock = start + fftw.spent  # the time limit's clock: FFTW's own planning left out
        bar.update((time.perf_counter() - clock) / limit, f"timing {len(prepared)} candidate(s) round-robin")
        each_round, flags = watch_rounds(device)
        samples = _time_prepared(prepared, (default_i, twin_i), sync, limit, clock, each_round)
        default_i, threads = default_threads(trees, prepared, samples, default_i, twin_i, sync, tol)
    default = trees[default_i] if default_i is not None else None
    timings = _timings(trees, prepared, samples, verdicts, default_i, tol)
    held = (sum(flags), len(flags)) if flags else ()
    return _finish(effort, problem, trees, timings, samples, prepared, default, top_k, limit, start, tol, device, sync,
                   threads, held, fftw.spent)


def _index(trees: list, node) -> int | None:
    """The index of ``node`` in ``trees`` (by digest), or None."""
    return None if node is None else next((i for i, t in enumerate(trees) if t.digest() == node.digest()), None)


def default_threads(trees, prepared, samples, default_i, twin_i, sync, tol) -> tuple[int | None, tuple]:
    """Which thread count of the default is the default: (its index, the figures for the record).

    With torch threads > 1 on the CPU the default (torch.fft at torch's count) and its one-thread
    twin (:func:`one_thread_twin`) are both timed in the rounds. The multi-thread default stays the
    default only when it beats the twin beyond the noise there (:func:`beats_default`) *and* by
    :data:`LOAD_MARGIN` while another process keeps a core busy (the median of the per-round
    ratios of a burst under load: a stall is what is looked for, so not the lower quartile); else
    the twin is the default, and every candidate is then judged against the one-thread call —
    a two-thread contender (pyFFTW threads=2, mkl_fft at torch's count) must then win under load
    too (:func:`robust_pick`'s load test). Nothing to decide (index unchanged, no figures) without a
    timed twin within the bound."""
    by = {p.index: (p, s) for p, s in zip(prepared, samples)}
    if default_i not in by or twin_i not in by or by[twin_i][0].error > tol:
        return default_i, ()
    quiet, noise = paired(by[default_i][1], by[twin_i][1])
    loaded = None
    if beats_default(quiet, noise):  # only a default that wins quietly is worth the load test
        burst = loaded_burst([(by[twin_i][0].fn, by[twin_i][0].inner),
                              (by[default_i][0].fn, by[default_i][0].inner)], sync)
        if burst is not None:
            loaded = statistics.median(a / b for a, b in zip(burst[1], burst[0]))
    keep = loaded is not None and loaded * (1 + LOAD_MARGIN) < 1
    chosen = default_i if keep else twin_i
    return chosen, (str(trees[default_i]), str(trees[twin_i]), quiet, loaded, str(trees[chosen]))


def _time_prepared(prepared, kept: tuple, sync, limit: float, start: float, each_round=None) -> list:
    """The round-robin samples of the prepared candidates, in what is left of the time limit."""
    if not prepared:  # every candidate failed or none fitted: _finish says which and why
        return []
    # the rounds leave CONFIRM_SHARE of the limit to the confirmation bursts (robust_pick)
    left = max(limit * (1 - CONFIRM_SHARE) - (time.perf_counter() - start), 0.0)
    budget = min(left, CANDIDATE_BUDGET_S * max(len(prepared), 1))
    # a round's cost as measured while preparing (each candidate's untimed call and its timed ones)
    per_round = max(sum(p.round_s for p in prepared), MIN_SAMPLE_S)
    rounds = int(min(MAX_ROUNDS, max(MIN_ROUNDS, budget / per_round)))
    # the estimate's pick, the default and its one-thread twin stay (``kept``: the last two's indices)
    keep = [p.index == 0 or p.index in kept for p in prepared]
    return timed_rounds([(p.fn, p.inner) for p in prepared], sync, rounds, budget, keep, each_round)


def _finish(effort, problem, trees, timings, samples, prepared, default, top_k, limit, start, tol, device, sync,
            threads: tuple = (), held: tuple = (), fftw_s: float = 0.0):
    """(winner node, Measurement, calibration samples) from the timings: :func:`measure`'s result."""
    if not any(t.verdict == SLOWER for t in timings):
        detail = "; ".join(f"{t.tree}: {t.verdict}" + (f" ({t.measured_error:.1e})" if t.measured_error else "")
                           for t in timings if t.verdict != NOT_TIMED_TOP_K)
        raise PlanningError(f"effort={effort!r}: no candidate for {problem.describe()} measured within the bound "
                            f"{tol:.1e}: {detail}")
    fns = {str(trees[p.index]): (p.fn, p.inner) for p in prepared}
    default_samples = next((s for p, s in zip(prepared, samples) if timings[p.index].default), None)
    pick = robust_pick(timings, fns, default_samples, device, sync)
    rounds = {str(trees[p.index]): s for p, s in zip(prepared, samples)}
    adapt = None
    if device.type == "cpu":  # the adaptive thread count (and the one-thread leaf it is ranked by)
        adapt, pick = _adaptive_first(pick, timings, trees, fns, rounds, sync)
    best = pick.best
    node = trees[[str(t) for t in trees].index(best.tree)]
    adaptive = adapt[2] if adapt is not None else ()
    if adapt is not None and adapt[0] is not None:  # the adaptive leaf replaces the one-thread pick
        node, best = adapt[:2]
        timings = [*timings, best]
    timings = [attrs.evolve(t, verdict=FASTEST) if t is best else t for t in timings]
    est = timings[0]
    regret = est.measured_us / best.measured_us if est.measured_us and est.verdict in (FASTEST, SLOWER) else None
    winner = attrs.evolve(node, measured_us=best.measured_us, measured_error=best.measured_error)
    samples_out = [(dict(trees[p.index].terms), statistics.median(s) * 1e6) for p, s in zip(prepared, samples)
                   if all(node.solver != "multicore" for _, node in trees[p.index].walk())]  # shards overlap
    timings.sort(key=lambda t: t.predicted_us)
    record = Measurement(effort, tuple(timings), len(trees), top_k, limit, time.perf_counter() - start, regret,
                         str(default) if default is not None else None, torch.get_num_threads(), time.time(),
                         pick.rule, pick.confirmation, pick.under_load, pick.busy, pick.checks, threads, adaptive,
                         held, fftw_s)
    return winner, record, samples_out


def _outputs_equal(a, b) -> bool:
    """Whether two calls' outputs (a tensor or a tuple of them) are bitwise identical."""
    a, b = (x if isinstance(x, tuple) else (x,) for x in (a, b))

    def bits(t):  # the bytes, so that -0.0 and 0.0 differ and NaN equals itself
        return t.detach().contiguous().view(torch.uint8)

    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype and torch.equal(bits(x), bits(y))
                                    for x, y in zip(a, b))


def _multi_twin(best: Timing, timings: list) -> Timing | None:
    """The timed multi-thread twin within the bound of ``best``, a one-thread library leaf at the
    root (the same tree but for its thread count); else None."""
    if tree_threads(best.tree) != 1 or not re.fullmatch(r"\(([a-z-]+) [^()]*\)", best.tree):
        return None
    bare = _threadless(best.tree)
    return next((t for t in timings if t.verdict == SLOWER and t.tree != best.tree and tree_threads(t.tree) > 1
                 and _threadless(t.tree) == bare and "adapt=" not in t.tree), None)


def _loaded_times(runners: list, sync) -> list | None:
    """Each runner's median time (µs) in one burst while another process keeps a core busy, or
    None where no load could be started."""
    burst = loaded_burst(runners, sync)
    return None if burst is None else [statistics.median(s) * 1e6 for s in burst]


def _time_loaded(missing: list, fns: dict, sync, loaded: dict) -> None:
    """Put the times under load (µs, :func:`_loaded_times`) of the timings ``missing`` into ``loaded``."""
    times = _loaded_times([fns[t.tree] for t in missing], sync) if missing else None
    if times is not None:
        loaded.update({t.tree: v for t, v in zip(missing, times)})


def _adaptive_first(pick: _Pick, timings: list, trees: list, fns: dict, rounds: dict, sync=None) -> tuple:
    """(:func:`adaptive_pick`'s result, the pick): the one-thread leaf whose adaptive form (or,
    where it has none, whose fixed call) is nearest the fastest both on a quiet and on a loaded
    machine, where that beats the robust pick.

    :func:`robust_pick` ranks fixed leaves against the default: on a loaded machine it took scipy
    at one worker for 16×4099 (708 µs quiet, 780 under load), and its two-worker twin stalled in
    every round, so no adaptive count; mkl_fft at one thread (798 µs, 906 under load) lost by 12 %,
    though its two-thread twin, bitwise identical, ran ~400 µs on the idle core the bench later
    found (1.4-1.8× per process in bench/measure_busy.py's quiet runs). And a one-thread leaf
    slower than the default on a quiet core is never a contender at all, though its adaptive form
    may beat a default that stalls under load: quiet runs of bench/measure_busy.py kept torch.fft
    at two threads for 16×4099 (620 µs quiet, ~8 ms under load, seen in the contenders' load burst)
    where pyFFTW's adaptive leaf runs 410-450 µs quiet and ~860 µs under load (1.32-1.35× pyFFTW's
    two threads in the bench, 2026-11-27).

    The pool: the pick, each confirmed one-thread contender that held up under load, and (with
    ``sync``, which allows a burst under load) the :data:`CONFIRM_MAX` fastest other one-thread
    library leaves with a multi-thread twin (those in the confirmation that failed it stay out).
    All of them and the pick are timed in one burst under load (figures from different bursts met
    different loads). Each has two figures:

    - its quiet time: as an adaptive leaf where its twin pays by :data:`STALL_MARGIN` in the
      lower quartiles and both give bitwise identical outputs, the twin's median over the rounds;
      else its own median (the expected time, not the least disturbed one: scipy's two workers at
      16×4099 ran 457 µs by the lower quartile in planning and ~700 µs, their one-worker time, in
      bench/measure_busy.py's rounds, where pocketfft's sleeping workers woke late); the faster of
      the two, as an adaptive leaf runs whichever count is faster at the time (a twin whose
      rounds stalled under a neighbour's load, 4654 µs by the median, made scipy's adaptive leaf
      the pick, 3.26× torch.fft in the bench);
    - its time under load: that burst's (the load test's where no burst could run; without
      either, the quiet time); a multi-thread pick that becomes adaptive (its one-thread twin
      timed, paying and bitwise the same) the faster of its own call's and its one-thread twin's:
      its adaptive leaf keeps two threads under a load that does not stall them, and runs the
      twin under one that does (scored by its own call alone, torch.fft 512×1024 at two threads,
      7.9 ms under load, lost to pyFFTW's adaptive leaf, which then ran 1.17× torch.fft; by the
      twin's alone, pyFFTW 4×16385 at two threads, 516 µs under load against its twin's 1039,
      lost to scipy's adaptive leaf, which then ran 1.91× it).

    Its score is its ratio to the fastest of the pool and the pick in the condition where it does
    worse, quiet or under load: a plan that is never slower than the call it replaces is one that
    is near the best in both. The mean of the two times, scored before, kept torch.fft at two
    threads for 16×4099 in quiet runs (620 µs quiet and 640 under load, against pyFFTW's adaptive
    leaf at 410 and 860: 630 against 635 µs), and the bench's quiet rounds then ran it 1.36-1.38×
    pyFFTW's two threads (2026-11-27, 17:18 UTC); by the worse condition torch.fft is 1.51× and
    pyFFTW 1.34×. A leaf replaces the pick where its score beats the pick's beyond
    :data:`NOISE_FLOOR`, or where the two scores are within it and the leaf is faster quiet
    beyond it (of leaves whose scores are within it, the fastest quiet goes first): where no leaf
    is near the best in both conditions the scores tie at the gap between the two conditions'
    best libraries (16×4099: pyFFTW's two threads quiet, scipy's one worker under load; torch.fft,
    pyFFTW's and scipy's adaptive leaves all 1.39-1.42× at worst), and the quiet machine, the
    common case, decides. It runs as an adaptive leaf where it has that form, else as the fixed
    one-thread leaf (a pick that stalls under load gives way to one that does not)."""
    best = pick.best
    if pick.busy is not None:  # too busy to measure: the default kept, at an adaptive count where it has one
        return _adaptive_default(pick, timings, trees, fns, rounds)
    held = {c[0]: c[5] for c in pick.checks if all(_wins(r) for r in c[1]) and (c[3] is None or _wins(c[3]))}
    checked = {c[0] for c in pick.checks}
    loaded = {k: v for k, v in held.items() if v is not None}
    loaded.update({c[0]: c[5] for c in pick.checks if c[0] == best.tree and c[5] is not None})
    same: dict = {}

    def twin_pays(t):  # the twin's quiet µs where the adaptive form exists, else None
        one = low_quantile(rounds[t.tree]) * 1e6
        twin = _multi_twin(t, timings)
        if twin is None or twin.tree not in rounds:
            return None
        two = low_quantile(rounds[twin.tree]) * 1e6
        if not two * STALL_MARGIN < one:
            return None
        if t.tree not in same:
            with torch.no_grad():
                same[t.tree] = _outputs_equal(fns[t.tree][0](), fns[twin.tree][0]())
        return statistics.median(rounds[twin.tree]) * 1e6 if same[t.tree] else None

    def quiet(t):  # the median over the rounds; an adaptive form's: the faster of its two counts'
        own = statistics.median(rounds[t.tree]) * 1e6
        return min(twin_pays(t) or own, own) if tree_threads(t.tree) == 1 else own

    mine = adaptive_pick(best, timings, trees, fns, rounds)  # the pick's own adaptive form, once
    runs = {best.tree: _one_twin(best, timings) if tree_threads(best.tree) > 1 and mine and mine[0] else best}
    pool = [t for t in timings if t.tree in held and t.tree != best.tree and tree_threads(t.tree) == 1]
    if sync is not None and torch.get_num_threads() > 1:
        others = sorted((t for t in timings if t.verdict == SLOWER and t.tree in rounds and t.tree not in checked
                         and t.tree != best.tree and _multi_twin(t, timings) is not None), key=quiet)
        pool += others[:CONFIRM_MAX]
        # all in one burst, those with a figure too: an earlier burst's load is not this one's
        # (1372 µs in the contenders' burst, 706 in this one: a neighbour's load came and went)
        timed = {t.tree: t for t in (best, runs[best.tree], *pool) if t.tree in rounds}
        _time_loaded(list(timed.values()), fns, sync, loaded)
    pool = [t for t in pool if t.tree in rounds and (t.tree in loaded or t.tree in held)]
    scorable = best.tree in rounds and (tree_threads(runs[best.tree].tree) == 1 or best.tree in loaded)
    if scorable and pool:

        def under_load(t):  # an adaptive multi-thread pick: the faster of its own call and its twin's
            figures = [loaded[k] for k in {t.tree, runs.get(t.tree, t).tree} if loaded.get(k)]
            return min(figures) if figures else quiet(t)

        figures = {t.tree: (quiet(t), under_load(t)) for t in (best, *pool)}
        pick_form = ", at one thread, as an adaptive leaf" if runs[best.tree] is not best else ""
        won = _worse_condition_winner(figures, best.tree, [t.tree for t in pool], pick_form)
        if won is not None:
            first = next(t for t in pool if t.tree == won[0])
            adapt = adaptive_pick(first, timings, trees, fns, rounds)
            form = "as an adaptive leaf" if adapt is not None and adapt[0] is not None else "at one thread"
            rule = f"{pick.rule}; then {first.tree} instead, {form}: {won[1]}"
            return adapt, attrs.evolve(pick, best=first, rule=rule)
    return mine, pick


def _worse_condition_winner(figures: dict, pick: str, pool: list, pick_form: str = "") -> tuple[str, str] | None:
    """The leaf of ``pool`` that replaces ``pick`` in :func:`_adaptive_first`'s contest, and why in
    words (``pick_form`` after the pick's figures: how it runs), or None: the pick stands.

    ``figures`` maps each tree (the pick's and the pool's) to its (quiet, under load) µs. A leaf's
    score is its ratio to the fastest figure in the condition where it does worse; of the pool's
    leaves within :data:`NOISE_FLOOR` of the lowest score, the fastest quiet is the challenger, and
    it wins where its score beats the pick's beyond the noise floor, or is within it and the
    challenger is faster quiet beyond it."""
    fastest = (min(q for q, _ in figures.values()), min(b for _, b in figures.values()))

    def score(t):  # its ratio to the fastest in the condition where it does worse
        return max(figures[t][0] / fastest[0], figures[t][1] / fastest[1])

    def near(a, b):  # a's worse condition as near the fastest as b's, within the noise floor
        return score(a) <= score(b) * (1 + NOISE_FLOOR)

    def shown(t):
        q, b = figures[t]
        return f"{q / fastest[0]:.2f}× the fastest quiet ({q:.0f} µs) and {b / fastest[1]:.2f}× under load ({b:.0f} µs)"

    lowest = min(pool, key=score)
    first = min((t for t in pool if near(t, lowest)), key=lambda t: figures[t][0])
    clearly = score(first) * (1 + NOISE_FLOOR) < score(pick)
    if not (clearly or (near(first, pick) and figures[first][0] * (1 + NOISE_FLOOR) < figures[pick][0])):
        return None
    return first, (f"{shown(first)}, at worst {score(first):.2f}×, against {score(pick):.2f}× for {pick} "
                   f"({shown(pick)}{pick_form})" + ("" if clearly else ": as near at worst, within the noise, and faster quiet"))


def _adaptive_default(pick: _Pick, timings: list, trees: list, fns: dict, rounds: dict) -> tuple:
    """(:func:`adaptive_pick`'s result, the pick) where the machine was too busy to measure: the
    default stays the call (the same library, bitwise the same outputs), but a multi-thread default
    runs as the adaptive leaf of its one-thread twin where that twin was timed and two threads pay
    in the least disturbed rounds. A fixed two-thread torch.fft kept by that verdict stalled later
    in the same process: 512×1024 ran 4.4 ms against 579 µs for the best library
    (bench/measure_busy.py, loaded, 2026-11-27)."""
    best = pick.best
    if tree_threads(best.tree) == 1:
        return adaptive_pick(best, timings, trees, fns, rounds), pick
    one = next((t for t in timings if t.verdict == SLOWER and tree_threads(t.tree) == 1 and "adapt=" not in t.tree
                and _threadless(t.tree) == _threadless(best.tree)), None)
    adapt = adaptive_pick(one, timings, trees, fns, rounds) if one is not None else None
    if adapt is None or adapt[0] is None:
        return None, pick
    return adapt, attrs.evolve(pick, best=one, rule=f"{pick.rule}; run as an adaptive leaf ({adaptive_words(adapt[2])})")


def adaptive_pick(best: Timing, timings: list, trees: list, fns: dict, rounds: dict):
    """The adaptive leaf in place of a one-thread pick, where its multi-thread twin pays quietly.

    ``best`` (the robust pick) is a one-thread library leaf at the root, and its multi-thread twin
    (timed in the same rounds, within the bound) ran faster there by more than the stall margin in
    their least disturbed rounds (lower quartiles: ``t2 × STALL_MARGIN < t1``, so a quiet
    multi-thread call sits clear below the adaptive leaf's stall threshold): the twin lost on the
    load rules or the noise, not on an idle core, so neither fixed count is right in both
    conditions. Not the paired median beyond the noise: on a loaded machine the twin's stalls make
    that noise (torch.fft 4096×192 at 2 threads: 0.50× the one-thread call by the median, noise
    427 %), and the adaptive leaf is what copes with those stalls. Where both give bitwise identical output on the measuring input (pocketfft
    and MKL over a batch usually do; FFTW's threaded plans may not), the pick becomes the twin's tree
    with ``adapt=T1`` (:class:`~trnplan.kernels.hostlib.threads.AdaptiveThreads`: the twin's count
    while its calls stay under T1, one thread for a back-off after one that does not), T1 the
    one-thread leaf's lower-quartile time over the rounds in µs. Returns None (no such twin, or
    it did not win quietly), or ``(node or None, Timing or None, figures)``: None, None where the
    outputs differ (the one-thread pick stays, the figures say why); figures as
    :attr:`Measurement.adaptive`."""
    one, twin = best, _multi_twin(best, timings)
    if twin is None:  # a multi-thread pick: adaptive too, against its one-thread twin (_one_twin)
        one, twin = _one_twin(best, timings), best
    if one is None or twin is None or one.tree not in rounds or twin.tree not in rounds:
        return None
    t1, t2 = (low_quantile(rounds[t.tree]) * 1e6 for t in (one, twin))
    if not t2 * STALL_MARGIN < t1:
        return None
    with torch.no_grad():
        same = _outputs_equal(fns[one.tree][0](), fns[twin.tree][0]())
    multi = trees[[str(t) for t in trees].index(twin.tree)]
    k = tree_threads(twin.tree)
    params = (*(p for p in multi.params if p[0] != "threads"), ("threads", k), ("adapt", max(1, round(t1))))
    node = attrs.evolve(multi, params=params)
    figures = (str(node), one.tree, t1, t2, same)
    if not same:  # the pick stays; for a one-thread pick the record says why it is not adaptive
        return (None, None, figures) if one is best else None
    timing = attrs.evolve(twin, tree=str(node),
                          measured_error=max(twin.measured_error or 0.0, one.measured_error or 0.0))
    return node, timing, figures


def _one_twin(best: Timing, timings: list) -> Timing | None:
    """The timed one-thread twin within the bound of ``best``, a multi-thread library leaf at the
    root; else None. A multi-thread pick (a two-thread leaf that won under load too) becomes
    adaptive against it: the load test is one short burst, and a two-thread call that held up
    there stalled later in the same process (pyFFTW 4×16385 and 1×262144 at two threads: 1.95× and
    1.97× the best library in bench/measure_busy.py's loaded run, 2026-11-27 13:08 UTC). Tried
    once before (2026-11-27 10:57, reverted): then the leaf backed off at every blip of the
    bench's mixed rounds and ran 1.5-1.9× torch.fft; with the leaf's later rules (a stall is a
    call over BIG_STALL × t1 confirmed by the next, or a running mean over STALL_MARGIN × t1) it
    ran 91-100 % of its quiet calls on two threads in those rounds."""
    if tree_threads(best.tree) < 2 or "adapt=" in best.tree or not re.fullmatch(r"\(([a-z-]+) [^()]*\)", best.tree):
        return None
    bare = _threadless(best.tree)
    return next((t for t in timings if t.verdict == SLOWER and t.tree != best.tree and tree_threads(t.tree) == 1
                 and _threadless(t.tree) == bare), None)


def adaptive_words(figures: tuple) -> str:
    """:attr:`Measurement.adaptive` in words (the rule's tail, explain()'s threads line)."""
    tree, one, t1, t2, same = figures
    if not same:
        return (f"threads: {one} kept at one thread: its {tree_threads(tree)}-thread twin ran {t2:.0f} µs quiet "
                f"against {t1:.0f} µs but their outputs differ bitwise, so no adaptive count")
    return (f"threads: adaptive ({tree_threads(tree)} while they pay: {t2:.0f} µs; 1 under load: {t1:.0f} µs; "
            f"a call over {BIG_STALL:g}× {t1:.0f} µs, or calls averaging over {STALL_MARGIN:g}× it, back off to one "
            f"thread), outputs bitwise identical")


def recheck(planner, problem, device: torch.device, measurement: Measurement, make_plan) -> tuple[float, float] | None:
    """Spot-check a reused measured record by the rules that made it: (the winner's paired ratio
    to the default, noise), or None when there is nothing to check (no default, or the default
    won); on a machine too busy to measure the noise is the default's own scatter, so only a
    winner slower beyond it is found stale.

    The winner and the default are timed in :data:`CONFIRM_BURSTS` bursts separated in time
    (:data:`RECHECK_ROUNDS` rounds each, all within about :data:`RECHECK_BUDGET_S`); the ratio is
    the *lowest* burst's lower-quartile ratio, so the record is found stale only when every burst
    has its winner slower. The caller re-measures when ``ratio > 1 + max(noise, NOISE_FLOOR)``."""
    winner = measurement.winner
    if measurement.default_tree is None or winner.default or winner.tree == measurement.default_tree:
        return None
    names = tuple(s.name for s in planner.solvers)
    split = _split_form(planner, device)
    x, _, _ = _seeded(problem, device, split)
    sync = _Readback() if split else _sync(device)
    runners = []
    for text in (measurement.default_tree, winner.tree):
        tree = planner.plan(problem, parse_strategy(text, names))  # replayed as stored
        fn = _call(make_plan(tree, planner.lower_plan(tree, problem, device)), x, sync)
        with torch.no_grad():
            fn()
            runners.append((fn, _inner(fn, sync)[0]))
    with torch.no_grad():
        samples = bursts(runners, sync, CONFIRM_BURSTS, RECHECK_ROUNDS, RECHECK_BUDGET_S / CONFIRM_BURSTS,
                         CONFIRM_GAP_S / 3)
    base = [v for burst in samples for v in burst[0]]
    ratios = [a / b for burst in samples for a, b in zip(burst[1], burst[0])]
    # on a machine too busy to measure (the default's own samples scatter over BUSY_NOISE) the
    # noise the caller compares with is that scatter: a winner 1000× slower is still found stale,
    # one a few per cent slower is left alone
    noise = spread(ratios)
    busy = spread(base)
    return min(burst_ratios(samples, 1)), max(noise, busy) if busy > BUSY_NOISE else noise


def ranked_candidates(candidates, measurement: Measurement):
    """The top-level candidates with verdicts from the measurement: the winner's solver is chosen."""
    winner = measurement.winner
    best_by_solver: dict = {}
    for t in measurement.timings:
        if t.measured_us is not None and t.verdict in (FASTEST, SLOWER):
            cur = best_by_solver.get(t.solver)
            if cur is None or t.measured_us < cur:
                best_by_solver[t.solver] = t.measured_us
    out = []
    for c in candidates:
        if c.solver == winner.solver:
            out.append(attrs.evolve(c, verdict=CHOSEN, reason=f"measured: {winner.tree}"))
        elif c.verdict in (CHOSEN, MORE_EXPENSIVE):
            t = best_by_solver.get(c.solver)
            ratio = t / winner.measured_us if t is not None else None
            why = (f"measured {ratio:.2f}× the chosen plan's time" if ratio is not None
                   else "not timed (see the measured candidates)")
            # faster by its median but not chosen: the rule (its line below the measured candidates)
            # keeps the default unless a tree is faster beyond the noise; "more expensive" would be false
            verdict = NOT_CHOSEN_NOISE if ratio is not None and ratio < 1 else MORE_EXPENSIVE
            if verdict == NOT_CHOSEN_NOISE:
                why += ", not faster beyond the noise (see the rule)"
            out.append(attrs.evolve(c, verdict=verdict, reason=why))
        else:
            out.append(c)
    return tuple(out)


def describe(m: Measurement) -> list[str]:
    """explain()'s lines for a measurement."""
    scope = "all" if m.top_k is None else f"up to {m.top_k} beyond the estimate's pick and the default, of"
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(m.measured_at)) if m.measured_at else "before 2026-11-26"
    lines = [(f"measured candidates (effort {m.effort}: {scope} {m.enumerated} candidate tree(s), round-robin, "
              f"{max((t.rounds for t in m.timings), default=0)} rounds, torch threads {m.threads or '?'}, "
              f"time limit {m.limit_s:g} s, {m.elapsed_s:.2f} s spent"
              f"{f' (of which FFTW_MEASURE {m.fftw_s:.2f} s, not counted in the limit)' if m.fftw_s else ''}"
              f"; measured {when})")]
    width = min(max(len(t.tree) for t in m.timings) + 2, 60)
    for t in m.timings:
        meas = f"{_us(t.measured_us):>10}" if t.measured_us is not None else f"{'—':>10}"
        err = f"{t.measured_error:.1e}" if t.measured_error is not None else "—"
        vs = f"{t.vs_default:.2f}× default" if t.vs_default is not None else ""
        noise = f"±{t.noise:.1%}" if t.noise is not None else ""
        mark = " ← chosen" if t.verdict == FASTEST else ""
        tags = "".join([" (default)" if t.default else "", " (estimate's pick)" if t.estimate else ""])
        tree = t.tree if len(t.tree) <= width else t.tree[: width - 1] + "…"
        lines.append(f"  {tree:<{width}} predicted {_us(t.predicted_us):>10}  measured {meas} {noise:>7} "
                     f"{vs:>14}  err {err:<7}  {t.verdict}{mark}{tags}")
    if m.default_threads:
        multi, twin, quiet, loaded, kept = m.default_threads
        load = f", {loaded:.2f}× under load" if loaded is not None else ", not timed under load"
        lines.append(f"  default's threads: {multi} measured {quiet:.2f}× {twin} in the rounds{load} (median per-round "
                     f"ratio; kept only if faster beyond the noise and by {LOAD_MARGIN:.0%} under load): "
                     f"the default is {kept}")
    if m.adaptive:
        lines.append(f"  {adaptive_words(m.adaptive)}")
    if m.rule:
        lines.append(f"  rule: {m.rule}")
    if m.confirmation:
        lines.append(f"  confirmation: {', '.join(f'{r:.2f}×' for r in m.confirmation)} the default in "
                     f"{len(m.confirmation)} bursts {CONFIRM_GAP_S * 1e3:.0f} ms apart (lower-quartile per-round ratio)")
    if m.under_load is not None:
        lines.append(f"  under load: {m.under_load:.2f}× the default while another process kept a core busy")
    for tree, ratios, noise, loaded, quiet_us, loaded_us in m.checks:
        own = f", {_us(quiet_us)}" if quiet_us is not None else ""
        load = f", {loaded:.2f}× under load" if loaded is not None else ""
        load += f" ({_us(loaded_us)})" if loaded_us is not None else ""
        lines.append(f"  contender {tree}: {', '.join(f'{r:.2f}×' for r in ratios)} the default per burst "
                     f"(noise {noise:.1%}){own}{load}")
    if m.held:
        lines.append(f"  run queue: another process runnable after {m.held[0]} of {m.held[1]} rounds"
                     + (": measured with a core held, so the next process that uses this record measures again"
                        if held_core(m) else ""))
    if m.busy is not None:
        lines.append(f"  machine busy: noise {m.busy:.0%} over {BUSY_NOISE:.0%}: the default kept, not a measured "
                     "pick; the next process that uses this record measures again")
    if m.regret is not None:
        lines.append(f"  regret of effort 'estimate': its pick measured {m.regret:.2f}× the chosen plan")
    return lines


def held_core(m: Measurement) -> bool:
    """Whether ``m`` was measured with another process runnable after :data:`BUSY_HELD` of its
    rounds or more (the run queue): a pick not to be reused as wisdom."""
    return bool(m.held) and m.held[0] >= BUSY_HELD * m.held[1]


def _us(us: float | None) -> str:
    return "—" if us is None or not math.isfinite(us) else format_time(us)


__all__ = ["Measurement", "Timing", "adaptive_pick", "adaptive_words", "background_load", "beats_default", "burst_ratios", "bursts", "busy_noise",
           "contenders", "decide", "default_threads", "describe", "held_core", "loaded_burst", "low_quantile", "measure", "one_thread_twin", "paired",
           "ranked_candidates", "recheck", "robust_pick", "round_robin", "spread", "time_call", "tree_threads", "watch_rounds"]
