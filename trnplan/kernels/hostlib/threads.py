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
threads win clearly under load too.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def in_threads(fn: Callable, threads: int | None) -> Callable:
    """``fn`` run with torch's (and so MKL's OpenMP) thread count at ``threads`` for the call.

    Parameters
    ----------
    fn : callable
        The library call.
    threads : int or None
        The thread count for the call; None gives ``fn`` itself (it runs at whatever count torch
        has when called).

    Returns
    -------
    callable
        ``fn``, or a wrapper that sets the count, calls ``fn`` and restores the caller's count
        (also when ``fn`` raises). Where the count is already ``threads`` it calls ``fn`` alone.
    """
    if threads is None:
        return fn
    if threads < 1:
        raise ValueError(f"a thread count must be ≥ 1, got {threads}")

    def call(*args, **kwargs):
        previous = torch.get_num_threads()
        if previous == threads:
            return fn(*args, **kwargs)
        torch.set_num_threads(threads)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(previous)

    return call
