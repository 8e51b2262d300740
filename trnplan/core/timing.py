"""The one timer: callables timed side by side, round-robin, and compared by paired per-round ratios.

Every timing in trnplan goes through :func:`round_robin`: measured planning (the candidates of a
problem, :mod:`trnplan.planner.measure`), the bench suite's cells (``trnplan bench``,
:func:`trnplan.tools.benchsuite.time_cells`) and the CPU model's calibration grid
(:func:`trnplan.tools.calibrate.time_round_robin`). The method, in three rules:

- **Samples, not single calls.** One sample is ``inner`` calls in a row, timed together, so that it
  lasts well above the clock's resolution and the call overhead of the timer itself
  (:func:`calls_per_sample`; measured planning asks for ≥ 50 µs a sample).
- **Round-robin.** In every round each callable runs one untimed call (it re-warms the caches the
  others evicted: a 64×4096 complex64 batch is 2 MB, the L2's size) and then one timed sample, in
  turn; a neighbour's load or the clock's drift then hits every callable in the same round alike.
  The turns come in a new (seeded) order every round: in a fixed order the callable after a
  two-thread one always ran while that one's OpenMP threads still spun or its stall ended (a
  leaf right after a stalled two-thread block measured up to 1.2× slower, bench/measure_busy.py
  ``--ab``), and the bench's measured-plan column always ran right after torch.fft's two threads.
- **Paired ratios.** Two callables are compared by the median of their per-round ratios
  (:func:`paired`), with the spread of those ratios as the noise (:func:`spread`): a stall that
  slows one round slows both sides of that round's ratio.

Nothing here knows devices: the caller passes ``sync`` (a CUDA
synchronize, a readback of a NeuronCore's output, or nothing on the CPU).
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence

__all__ = ["calls_per_sample", "no_sync", "paired", "round_robin", "spread"]


def no_sync() -> None:
    """The ``sync`` of host callables (and of callables that synchronise themselves): nothing to wait for."""


def calls_per_sample(fn: Callable[[], object], sync: Callable[[], None], sample_s: float) -> tuple[int, float]:
    """(calls per sample so that one lasts ≥ ``sample_s``, seconds of one call), after a warm call.

    Parameters
    ----------
    fn : callable
        The call to time (no arguments).
    sync : callable
        Waits for the device to finish ``fn``'s work (a no-op on the CPU).
    sample_s : float
        The least seconds a sample of ``inner`` calls should last.

    Returns
    -------
    tuple of (int, float)
        ``inner`` (at least 1) and the seconds the second call took (at least 0.1 µs).
    """
    fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    first = max(time.perf_counter() - t0, 1e-7)
    return max(1, int(sample_s / first)), first


def round_robin(runners: Sequence[tuple[Callable[[], object], int]], sync: Callable[[], None], rounds: int,
                stop_s: float | None = None, min_rounds: int = 1,
                each_round: Callable[[], None] | None = None) -> list[list[float]]:
    """Seconds per call of each ``(fn, inner)`` in ``runners``, one sample per round.

    In every round each runner makes one untimed call, then ``inner`` timed calls (one sample: their
    mean), in turn; the first round in the given order, each later one in a new order (shuffled,
    seeded by the number of runners: the same orders in every process).

    Parameters
    ----------
    runners : sequence of (callable, int)
        The calls and their calls per sample (:func:`calls_per_sample`).
    sync : callable
        Waits for the device; called after the untimed call and after each sample's calls.
    rounds : int
        Rounds at most.
    stop_s : float, optional
        Stop once this many seconds have passed and ``min_rounds`` rounds are done.
    min_rounds : int, default 1
        Rounds made whatever ``stop_s`` says.
    each_round : callable, optional
        Called after each round, outside the timed calls (measured planning asks the run queue
        there whether another process held a core).

    Returns
    -------
    list of list of float
        Per runner, its samples in round order (seconds per call), as many for every runner.
    """
    samples: list[list[float]] = [[] for _ in runners]
    order = list(range(len(runners)))
    shuffle = random.Random(len(runners)).shuffle  # seeded: the same orders in every process
    start = time.perf_counter()
    for r in range(rounds):
        if r:  # a new order every round after the first (see the module's rules)
            shuffle(order)
        for k in order:
            (fn, inner), out = runners[k], samples[k]
            # one untimed call first: it re-warms the caches the other candidates' calls evicted
            # (a 64×4096 complex64 batch is 2 MB, the L2's size), so every sample is a warm call,
            # as in a loop that calls the plan again and again
            fn()
            sync()
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            sync()
            out.append((time.perf_counter() - t0) / inner)
        if each_round is not None:
            each_round()
        if stop_s is not None and r + 1 >= min_rounds and time.perf_counter() - start > stop_s:
            break
    return samples


def spread(values) -> float:
    """Half the inter-quartile range of ``values`` over their median (0 for fewer than two)."""
    values = list(values)
    if len(values) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return (q3 - q1) / 2 / max(statistics.median(values), 1e-30)


def paired(samples: list[float], base: list[float]) -> tuple[float, float]:
    """(median, noise) of the per-round ratios ``samples[r] / base[r]`` (noise: :func:`spread`)."""
    ratios = [s / b for s, b in zip(samples, base)]
    return statistics.median(ratios), spread(ratios)
