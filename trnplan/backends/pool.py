"""The shard thread pool: worker threads that run a plan's batch shards beside the calling thread.

Used by the multicore solver's shards on the CPU and by the Neuron backend's one-worker-per-NeuronCore
executor (``Backend.shard_executor``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch

from trnplan.core import state

_POOLS: dict = {}


def _init_worker(threads: int) -> None:
    """A new worker thread adopts torch's intra-op thread count: OpenMP keeps that setting per
    thread, so a fresh thread would otherwise run torch ops on the machine's default (every
    core), oversubscribing the cores the other shards use (measured: a 2-shard split of 128 ×
    1024 ran 4× slower than unsplit on 2 vCPUs before this)."""
    torch.set_num_threads(threads)


def thread_pool(workers: int) -> ThreadPoolExecutor:
    """The process-wide worker pool of ``workers`` threads (made once per size and thread count)."""
    key = (workers, torch.get_num_threads())
    pool = _POOLS.get(key)
    if pool is None:
        pool = _POOLS.setdefault(key, ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trnplan-shard",
                                                         initializer=_init_worker, initargs=(key[1],)))
    return pool


def _reset() -> None:
    """No shard pool yet (the idle workers of the old ones end; a plan asks for its pool at each call)."""
    pools = list(_POOLS.values())
    _POOLS.clear()
    for pool in pools:
        pool.shutdown(wait=False)


state.register("backends.pools", _reset)


__all__ = ["thread_pool"]
