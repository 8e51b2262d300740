"""A library call at an explicit thread count: torch's intra-op count set for the call, then restored.

torch.fft (MKL on the CPU) and mkl_fft (its MKL is ``libmkl_gnu_thread``, on the GNU OpenMP
runtime torch loaded) both follow the OpenMP thread count ``torch.set_num_threads`` sets, and
neither takes a thread count per call (mkl_fft 2.3.2: ``fft(x, n=None, axis=-1, norm=None,
out=None)``). A leaf whose thread count is part of its tree (``(native 1024 threads=1)``) runs
its call inside :func:`in_threads`. The pair ``set_num_threads(1)``, ``set_num_threads(2)``
measured 0.19 µs here (torch 2.13.0, 2 vCPUs, 20 000 calls), under 1 % of the 40 µs a call of a
benchmark row takes at the least.

Why the count must be explicit: with torch's two OpenMP threads on a 2-core machine where
another process keeps one core busy, each parallel region waits for the descheduled thread — a
64×1024 c2c took 9.5 ms in torch.fft at 2 threads (a measured-planning run on this machine,
2026-11-27, load 2.3) against 37 µs quiet, while one thread is unaffected. Measured planning
times both counts (:mod:`trnplan.planner.measure`) and keeps the one-thread leaf unless more
threads win clearly under load too; where the two-thread call wins only quietly, and both counts
give bitwise identical results, the plan runs :class:`AdaptiveThreads`: two threads while they
pay, one while a call shows the other core busy.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

from trnplan.kernels.hostlib.occupancy import occupancy


def in_threads(fn: Callable, threads: int | None) -> Callable:
    """``fn`` run with torch's (and so MKL's OpenMP) thread count at ``threads`` for the call.

    Parameters
    ----------
    fn : callable
        The library call, taking positional arguments (bind keywords first, e.g. with
        :func:`functools.partial`).
    threads : int or None
        The thread count for the call; None gives ``fn`` itself (it runs at whatever count torch
        has when called).

    Returns
    -------
    callable
        ``fn``, or a wrapper that sets the count, calls ``fn`` with the wrapper's positional
        arguments and restores the caller's count (also when ``fn`` raises). Where the count is
        already ``threads`` it calls ``fn`` alone.

    Notes
    -----
    The wrapper takes no keywords and looks nothing up in torch's module per call: right after a
    call that evicted the caches (a 6 MB batch), Python's own work runs cold, and a ``**kwargs``
    dict and the ``torch.get_num_threads`` lookup cost 3.7 µs of the wrapper's 4.5 µs per call
    at 4096×192 (1.1 % of torch.fft's 333 µs; shuffled rounds, 2026-11-27).
    """
    if threads is None:
        return fn
    if threads < 1:
        raise ValueError(f"a thread count must be ≥ 1, got {threads}")
    get, put = torch.get_num_threads, torch.set_num_threads

    def call(*args):
        previous = get()
        if previous == threads:
            return fn(*args)
        put(threads)
        try:
            return fn(*args)
        finally:
            put(previous)

    return call


#: two-thread calls whose running mean is slower than the one-thread time × this are stalling
#: (the other core is shared; a single call over BIG_STALL × t1 at once): quiet two-thread calls
#: scatter ~2-5 % around their median here, and the twins worth adapting between differ by ≥ 10 %
#: (pyFFTW 16×4099: 524 µs at 2 threads, 784 at 1), so a mean over 1.1 × t1 is one the one-thread
#: twin would have beaten
STALL_MARGIN = 1.1
#: the back-off after a stall, in seconds of wall time at one thread: MIN_BACKOFF_S after the
#: first, doubled at every stall of the probe that follows, at most MAX_BACKOFF_S; and at least
#: STALL_COST × the stall's excess over t1, so that a stalled probe costs ≤ 1/STALL_COST (5 %) of
#: the one-thread time before it (a stall took 5-20× t1 here: pyFFTW 1×65537 8.4 ms against
#: 1.69 ms). In wall time, because a competing process holds a core for scheduler slices of
#: milliseconds: 4 calls of 150 µs (0.6 ms) was too short a back-off for a probe to find the core
#: free (a first version counted calls only: 19 stalls in 500 calls of torch.fft 512×1024 at load
#: 5). In wall time only: a back-off that also ran as many calls as fill its period at t1 (so that
#: a plan called once a second would not probe at every call) kept a leaf called once every few
#: milliseconds on one thread for ~7× its period, where a woken pool thread wins the core back
#: from a spinning process and most two-thread calls held up: in rounds of bench/measure_busy.py's
#: columns under a spinner, its per-round median ratio to torch.fft's two threads was 1.59 against
#: 1.36 in wall time only (512×1024), 1.22 against 0.84 (pyFFTW 1×262144), and its mean time 685
#: against 678 µs and 1315 against 1202 (2026-11-27)
MIN_BACKOFF_S, MAX_BACKOFF_S, STALL_COST = 0.01, 1.0, 20.0
#: a two-thread call over BIG_STALL × t1 is a big stall (a back-off once the next call is slow too, at
#: once for a probe after a back-off; a core held by another process costs
#: a scheduler slice of milliseconds: two-thread calls under load here took 0.8-4.5 ms against t1
#: 0.45-0.6 ms); a slower one below it only moves the running mean of the two-thread calls (weight
#: EMA_WEIGHT per call), and the leaf backs off when that mean passes STALL_MARGIN × t1. Single
#: slow calls of 1.1-2.2 × t1 are a quiet machine's blips and other thread pools waking (torch.fft
#: 512×1024 in bench/measure_busy.py's rounds, beside pyFFTW's and scipy's pools, ~0.6 a round):
#: backing off at each, even for what it was worth alone, cost more than it saved, as the calls at
#: one thread and the probe after them (the pool's threads asleep again) ran slow too: per-round
#: 1.29-1.33 × the fixed two-thread plan against the fixed plan's 1.10 × the best library
#: (2026-11-27, 2 runs each)
BIG_STALL, EMA_WEIGHT = 2.0, 0.125


class AdaptiveThreads:
    """A library call at two thread counts, picked per call: more threads while they pay, one
    while another process holds a core.

    On a 2-core machine a two-thread call wins while the other core is idle (pyFFTW 16×4099:
    524 µs at 2 threads, 784 at 1) and stalls 5-20× while another process keeps a core busy
    (pyFFTW 1×65537: 1.69 ms quiet, 8.4 ms under load), so no fixed count is right in both
    (issue 32). Each call is timed with :func:`time.perf_counter` (~0.1 µs; no ``/proc`` read per
    call, which would cost more than the decision saves on a 150 µs call).

    Where the machine's run queue describes this process's cores (``room``: Linux, see
    :mod:`~trnplan.kernels.hostlib.occupancy`), it is asked at the leaf's decisions, never per
    call (~20-40 µs a question):

    - a two-thread call over ``t1 × BIG_STALL`` with the cores free is a hiccup (:attr:`blips`),
      and nothing changes; with another thread runnable it is judged by the time-only rules below
      (the next call decides). Taken at once as a stall, it cost the bench's quiet rounds: right
      after torch.fft, whose OpenMP worker spins on for ~3 ms, pyFFTW's two-thread 1×262144 took
      3.3 ms against 0.44, and in 24 of 124 such stalls on a quiet machine a thread not of this
      process stayed runnable through three readings of the run queue (~100 µs; which thread it
      was, a scan of /proc came too late to see): 41 back-offs in 300 rounds, the plan 1.031× pyFFTW's own call, against 0-1 and
      1.016-1.020× when the next call decides. Under a spinner toggled at random (``--queue-ab``,
      three runs each) the one more stalled call at a load's onset moved the leaf's mean over the
      better fixed count 0.70-0.73 → 0.74-0.78 (torch.fft 512×1024), 1.01-1.02 → 1.02-1.04 (scipy
      512×1024) and 0.69-0.73 → 0.70-0.74 (pyFFTW 16×4099; 2026-11-27 evening);
    - during a back-off it is asked every :data:`MIN_BACKOFF_S` of wall time, and the cores free
      end the back-off at once (:meth:`_freed`): the leaf is back on two threads within ~10 ms of
      the load's end, where the doubling back-off alone kept it on one thread for up to
      :data:`MAX_BACKOFF_S`. A core still taken neither ends nor extends a back-off: its probe
      still runs, since another process runnable is not yet a stalled call.

    Otherwise, and without the run queue (``room`` None), the time-only rules decide:

    - on ``many`` threads, a call slower than ``t1 × BIG_STALL`` (``t1``: the one-thread twin's
      time) is a stall, and so is a run of calls whose running mean (weight :data:`EMA_WEIGHT`
      a call, from ``t2``) passes ``t1 × STALL_MARGIN``: the calls of the next back-off period run
      on one thread, until the period has passed in wall time (a plan called rarely probes at
      its next call: see :data:`MIN_BACKOFF_S`); a single slow call below ``BIG_STALL × t1`` is
      a blip, not a held core; and a big
      stall after fast calls waits for the next call, which makes it a stall when it is slow too
      (over ``STALL_MARGIN × t1``) and a hiccup when it is fast: a quiet machine here stalled a
      call for 4-8 ms now and then (t1 0.45 ms), and a 10 ms back-off for each cost more than the
      hiccups (torch.fft 512×1024 in bench/measure_busy.py's rounds: 1.12-1.22 × the best
      library against the fixed leaf's 1.08-1.09, 2026-11-27), while under load the second
      call stalls too, and the doubling back-off makes that second call rare;
    - the back-off is what the stall is worth, :meth:`_worth`: its excess over ``t1`` (the
      call's, or the mean's) over the share of time more threads save, ``(t1 - t2) / t1``, ``t2``
      the fastest call on ``many`` threads seen (``t1 / threads`` until one is), and at most
      :data:`STALL_COST` × the excess;
      after a big stall at least :data:`MIN_BACKOFF_S`, doubled while the probes stall (at most
      :data:`MAX_BACKOFF_S`) and reset by a fast call;
    - the probe, the first call on ``many`` threads after calls on one, is judged only for a big
      stall: the pool's other threads slept through the one-thread calls, and waking them made
      the probe slow as often as not;
    - a fresh leaf's first call (on ``many`` threads) is not judged: it is cold (first touch of
      its buffers, the thread pool waking). The first call of a measured plan's leaf in
      bench/measure_busy.py took 3.6-6.4 ms (t1 ~0.45 ms), and the ~110 ms back-off it bought
      (then 20 × the excess before ``t2`` was measured) kept torch.fft 4096×192 on one thread
      for 60 % of its quiet calls (1.22-1.33× the fixed two-thread call, 2026-11-27);
    - ``t1`` is lowered to the fastest one-thread call seen (a stale or slow measurement would
      let stalls pass as fast calls; a lower ``t1`` only errs towards the one-thread call).

    Only offered where both counts give bitwise identical results (measured planning checks it
    on its input), so which count ran never changes a result.

    Thread safety: the state is a few attributes, each written by a single assignment; callers
    on several Python threads may interleave their updates (a back-off cut short or doubled
    twice, a stall missed), which changes only which count the next calls run at, never a
    result, so no lock is taken (a lock would cost more than the call's decision).

    Parameters
    ----------
    one, many : callable
        The call at one thread and at ``threads`` threads (the same positional arguments, the
        same results; no keywords, as :func:`in_threads`).
    t1 : float
        The one-thread call's quiet time, seconds (> 0).
    threads : int
        The thread count of ``many`` (reported by :attr:`threads_now`).
    clock : callable
        The timer, seconds (tests pass a fake one).
    room : callable or None
        ``room(threads)``: whether ``threads`` threads would each find a core now
        (:meth:`~trnplan.kernels.hostlib.occupancy.Occupancy.room`); None: the time-only rules.
    """

    def __init__(self, one: Callable, many: Callable, t1: float, threads: int = 2, clock=time.perf_counter,
                 room: Callable[[int], bool] | None = None):
        if not t1 > 0:
            raise ValueError(f"the one-thread time t1 must be > 0 seconds, got {t1!r}")
        self.one, self.many, self.t1, self.threads, self.clock = one, many, float(t1), threads, clock
        self.fast = self.t1 * STALL_MARGIN  # a two-thread call at most this long is fast (t1 × STALL_MARGIN)
        self.room = room
        self.next_ask = -math.inf  # during a back-off, when to ask the run queue next (clock time)
        self.early = 0  # back-offs ended early: the run queue showed the cores free (for tests and benchmarks)
        self.blips = 0  # slow calls with the cores free: not stalls (for tests and benchmarks)
        self.until = -math.inf  # one thread until this clock time (the back-off in progress)
        self.backoff = MIN_BACKOFF_S  # the next back-off's length (seconds)
        self.stalls = 0  # stalls seen (for tests and benchmarks)
        self.t2 = math.inf  # the fastest call on ``many`` threads seen (what they save: _worth)
        self.warm = False  # whether a call has run: the first is cold, and not judged
        self.cold = True  # whether the last call ran on one thread (the pool's other threads asleep)
        self.mean2: float | None = None  # running mean of the judged two-thread calls since a back-off
        self.suspect = 0.0  # a big stall after fast calls, waiting for the next call to confirm it (seconds)
        #: whether the next fast two-thread call may take the short path (warm, not a probe, no stall
        #: pending, a running mean and the shortest back-off): see __call__
        self.steady = False

    @property
    def threads_now(self) -> int:
        """The count a call made now runs at."""
        return 1 if self.clock() < self.until else self.threads

    def __call__(self, *args):
        clock = self.clock
        start = clock()
        if start < self.until and not self._freed(start):
            self.cold, self.steady = True, False
            out = self.one(*args)
            took = clock() - start
            if took < self.t1:
                self.t1, self.fast = took, took * STALL_MARGIN
            return out
        out = self.many(*args)
        end = clock()
        took = end - start
        if self.steady and took <= self.fast:
            # the common call (two threads, fast, nothing pending): what :meth:`_judge` does for it, in
            # fewer steps. Shuffled rounds of torch.fft 256×64 (5.6 µs): the leaf over its two-thread
            # call 12.2-12.4 % with the full rules, 9.9-10.0 % with this path; at 4096×192 (250 µs)
            # 1.1-1.7 % and 0.7-1.2 %, where its ~0.5 µs of Python alone would be 0.2 %: after a call
            # that evicted the caches (a 6 MB batch) the bookkeeping runs cold (2026-11-27). Then the
            # bound precomputed (``fast``), no module lookups, no ``**kwargs`` here or in in_threads:
            # the leaf over a bare torch.fft call at 4096×192 1.024-1.028 → 1.010-1.011, and
            # (native 192 threads=2 adapt=600)'s execute() 1.038-1.045 → 1.025-1.026 (two runs each
            # of 1000 shuffled rounds; 2026-11-27 evening)
            mean = self.mean2 = self.mean2 + EMA_WEIGHT * (took - self.mean2)
            self.t2 = min(self.t2, took)
            if mean > self.fast:  # slow over a run of calls (as _judge)
                self.steady = False
                self._back_off(mean - self.t1, end, big=False)
            return out
        self._judge(took, end)
        return out

    def _judge(self, took: float, end: float) -> None:
        """The rules (the class's notes) for a call on ``many`` threads that took ``took`` seconds,
        ending at clock time ``end``: a stall, a hiccup, a fast call; and whether the next fast call
        may take :meth:`__call__`'s short path (:attr:`steady`)."""
        self.steady = False
        if not self.warm:  # a fresh leaf's first call: cold (see the class's notes), not judged
            self.warm = True
            return
        cold, self.cold = self.cold, False
        suspect, self.suspect = self.suspect, 0.0
        if took > self.t1 * BIG_STALL:  # a core held for a scheduler slice, or a hiccup
            if self._busy() is False:  # the cores free: a hiccup
                self.blips += 1
            elif cold or suspect:  # the probe after a back-off, or the second slow call in a row
                self._back_off(max(took, suspect) - self.t1, end, big=True)
            else:  # one stall after fast calls: the next call decides
                self.suspect = took
            return
        if suspect and took > self.t1 * STALL_MARGIN:  # slow again: the stall was no hiccup
            self._back_off(suspect - self.t1, end, big=True)
            return
        if took <= self.t1 * STALL_MARGIN:
            self.backoff = MIN_BACKOFF_S
            self.t2 = min(self.t2, took)
        if cold:  # the probe after calls at one thread woke the pool's threads: not judged
            return
        mean = self.mean2 if self.mean2 is not None else (self.t2 if math.isfinite(self.t2) else took)
        self.mean2 = mean = mean + EMA_WEIGHT * (took - mean)
        if mean > self.t1 * STALL_MARGIN:  # slow over a run of calls: the other core is shared
            self._back_off(mean - self.t1, end, big=False)
        else:  # nothing pending: the next fast call may take the short path
            self.steady = self.backoff == MIN_BACKOFF_S

    def _busy(self) -> bool | None:
        """Whether another process holds a core the extra threads need, now (None: unknown, also
        where ``/proc`` could not be read this time: the user's call never fails for it)."""
        if self.room is None:
            return None
        try:
            return not self.room(self.threads)
        except (OSError, ValueError, IndexError):
            return None

    def _freed(self, start: float) -> bool:
        """During a back-off, with the run queue: every MIN_BACKOFF_S of wall time, whether the
        cores are free again, which ends the back-off now (the next call probes two threads).
        The doubling back-off alone kept a leaf on one thread for up to MAX_BACKOFF_S after the
        load had gone; asking costs ~20-40 µs, ≤ 0.4 % of the 10 ms between asks. A core still
        taken does not end the back-off, nor extend it: the probe at its end still runs, since
        another process runnable is not yet a stalled call — in bench/measure_busy.py's rounds a
        spinning process held a core for a whole row while torch.fft's two threads ran 332 µs
        against its one thread's 450 (the kernel ran the pool's woken thread ahead of the spinner),
        and a leaf that waited on the run queue instead of probing ran 1.6-1.7× torch.fft there
        (2026-11-27)."""
        if self.room is None or start < self.next_ask:
            return False
        self.next_ask = start + MIN_BACKOFF_S
        if self._busy() is not False:
            return False
        self.until = -math.inf
        self.early += 1
        return True

    def _back_off(self, excess: float, end: float, big: bool) -> None:
        """Run on one thread from ``end`` for what a stall of ``excess`` seconds is worth
        (:meth:`_worth`); after a big stall at least the doubling back-off. With the run queue it
        may end early (:meth:`_freed`)."""
        self.stalls += 1
        self.mean2 = None
        self.next_ask = end + MIN_BACKOFF_S
        period = self._worth(excess)
        if big:
            period = max(self.backoff, period)
            self.backoff = min(period * 2, MAX_BACKOFF_S)
        period = min(period, MAX_BACKOFF_S)
        self.until = end + period

    def _worth(self, excess: float) -> float:
        """The back-off a stall of ``excess`` seconds over ``t1`` is worth: the time at one thread
        whose lost savings, at ``(t1 - t2) / t1`` of each second, equal the stall's cost — the
        break-even of renting and buying, which keeps a stall and its back-off within about twice
        what the better fixed count would have cost over them — and never over :data:`STALL_COST`
        × the excess. The flat 20 × kept pyFFTW 4×16385 (t1 900 µs, t2 470 µs) on one thread for
        ~0.3 s after each 15 ms stall on a machine where stalls were rare: 1.5-1.8× the fixed
        two-thread call, by the median and by the mean alike (bench/measure_busy.py,
        2026-11-27); break-even is 2.1 × the excess there. Before a fast call has measured ``t2``
        it is taken as ``t1 / threads`` (the threads' ideal share): a fresh plan's second call,
        still page-faulting its new buffers (8 ms against t1 0.45 ms), otherwise bought 20 × its
        excess, 150 ms, of one-thread calls."""
        t2 = self.t2 if math.isfinite(self.t2) else self.t1 / self.threads
        cap = STALL_COST * excess
        saved = (self.t1 - t2) / self.t1
        return min(excess / saved, cap) if saved > 0 else cap


#: ``adaptive(room=MACHINE)``: this machine's run queue (:func:`~trnplan.kernels.hostlib.occupancy.occupancy`)
MACHINE = "machine"


def adaptive(one: Callable, many: Callable, t1: float, threads: int = 2, clock=time.perf_counter,
             room: Callable[[int], bool] | str | None = MACHINE) -> AdaptiveThreads:
    """:class:`AdaptiveThreads` of ``one`` and ``many`` with the one-thread time ``t1`` (seconds),
    asking ``room`` whether the cores are free at its decisions: :data:`MACHINE` for this
    machine's run queue where it describes this process's cores (else None), None for the
    time-only rules.

    The process's own runnable threads never count as taking a core, whichever pool the call
    runs on: counting them for pyFFTW's and scipy's pools (torch's OpenMP workers spin 10-40 ms
    after each parallel region) was tried, and kept pyFFTW 512×1024's adaptive leaf at its
    one-thread 924 µs while the same two-thread call ran 513 µs beside it (bench/measure_busy.py,
    2026-11-27): the kernel runs a woken pool thread ahead of a spinning one."""
    if room == MACHINE:
        occ = occupancy()
        room = None if occ is None else occ.room
    return AdaptiveThreads(one, many, t1, threads, clock, room)
