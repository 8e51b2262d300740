"""multicore: split the batch into C shards, each run by a child plan on its own core.

``plan_many(..., cores=C)`` makes every sub-problem carry ``cores=C``. This solver is one more
candidate at each node: it cuts the node's batch into ``min(C, batch)`` shards whose sizes differ
by at most one (``q + 1`` for the first ``batch mod C`` shards, ``q`` for the rest), plans *one*
child for each distinct shard size (with ``cores=1``, so the split does not recurse), and runs the
shards concurrently through the backend's shard executor
(:meth:`Backend.shard_executor <trnplan.backends.base.Backend.shard_executor>`): on the CPU a
pool of worker threads that run the lowered child (torch and the host FFT libraries release the
GIL while they compute); on Trainium the seam for one loaded artifact per NeuronCore.

A single transform (batch 1) is not split here: composites plan their passes as batches, and
those children inherit ``cores``, so a four-step of one long transform runs its column and row
passes across cores (the row-column split), and an nd plan its axis passes.

**Cost.** Shards run concurrently, so the node costs the *slowest* shard plus the split and
gather, not the sum. A child's work is priced by the profile, whose rates were measured with
``profile.threads`` threads; a shard runs on one core, so its throughput terms (flops and bytes)
are scaled by ``threads`` while its latency terms (dispatched ops, library calls) are not::

    t = max_shards (latency + threads · throughput) + shards · task_us + gather copy

On this 2-core CPU with torch's two intra-op threads the throughput term does not shrink, so
splitting only pays where a plan is latency-bound on one thread; the cost model therefore rarely
picks it, and effort="measure" times it (docs/benchmarks.md has the measured speedups). On a
backend whose profile is per core (Neuron: ``threads = 1``) splitting pays for large batches.
"""

from __future__ import annotations

import math
import threading

import attrs
import torch

from trnplan.backends import get_backend
from trnplan.core.cost import Work, copy
from trnplan.planner.solver import Solver, itemsize, library_io, root_output

#: fixed cost of handing one shard to a worker and collecting it (submit, wake, join), µs:
#: ThreadPoolExecutor round trips measured 15–40 µs on this 2-vCPU machine
TASK_US = 25.0


def shard_sizes(batch: int, cores: int) -> tuple[int, ...]:
    """Shard sizes of ``batch`` over ``cores``: ``min(cores, batch)`` shards differing by ≤ 1."""
    shards = min(cores, batch)
    q, r = divmod(batch, shards)
    return tuple(q + 1 if i < r else q for i in range(shards))


def _shard_time(child, profile) -> float:
    """A child's time when it runs alone on one core (see the module docstring)."""
    terms = dict(child.terms)
    if not terms:
        return child.time_us * profile.threads
    return _one_core_time(terms, profile)


def _work_shard_time(work: Work, profile) -> float:
    """:func:`_shard_time` of a bare copy or packing :class:`Work` (launches and bytes only)."""
    return _one_core_time({"launches": work.launches, "bytes": work.bytes}, profile)


def _one_core_time(terms: dict, profile) -> float:
    """Latency terms (dispatched ops, library calls) as priced; throughput terms on one core."""
    threads = profile.threads
    latency = sum(v * profile.price(k) for k, v in terms.items() if k in ("launches", "fft_calls"))
    throughput = sum(v * profile.price(k) for k, v in terms.items() if k not in ("launches", "fft_calls") and v)
    return latency + threads * throughput


class Multicore(Solver):
    name = "multicore"
    #: 2: library shards write their rows of the output in place (no gather copy)
    version = 2
    composite = True
    kinds = ("c2c", "r2c", "c2r")
    ranks = "any"
    options = ("shards",)

    def why_not(self, problem, planner, forced):
        if problem.cores == 1:
            return "cores=1: nothing to split over (plan with cores=C to split the batch)"
        if problem.batch < 2:
            return (f"batch {problem.batch}: one transform is not split into shards here; composites "
                    f"(four-step, nd) run their passes, which are batches, across the cores")
        if planner.exportable:
            return ("an artifact is one graph: shards on worker threads cannot be exported (on Trainium "
                    "the backend loads one artifact per NeuronCore instead)")
        if planner.backend.shard_executor_reason() is not None:
            return planner.backend.shard_executor_reason()
        return None

    def why_not_spec(self, problem, spec):
        reason = super().why_not_spec(problem, spec)
        shards = spec.option("shards")
        if reason is None and shards is not None and shards != len(shard_sizes(problem.batch, problem.cores)):
            return (f"multicore splits batch {problem.batch} over cores={problem.cores} into "
                    f"{len(shard_sizes(problem.batch, problem.cores))} shards, not {shards}")
        return reason

    def plan(self, problem, planner, spec):
        sizes = shard_sizes(problem.batch, problem.cores)
        distinct = sorted(set(sizes), reverse=True)
        norm = "forward" if problem.inverse else "backward"  # unscaled: the root applies the norm
        children = []
        for i, size in enumerate(distinct):
            sub = attrs.evolve(problem, batch=size, cores=1, norm=norm)
            children.append(planner.plan(sub, spec.child(i) if spec is not None else None))
        out_elems = math.prod(problem.out_shape) * (1 if problem.real_output else 2)
        size = itemsize(problem)
        # at the root, library children run on views of the user's tensor (MulticoreShards'
        # library_call): they pack nothing, and each shard copies its result into the output on
        # its own core. Otherwise the shards' split results are gathered (one copy on the calling
        # thread) and packed into the complex output like any split-tensor root's
        root = planner.at_root(problem)
        direct = root and all(planner.solver(c.solver) is not None and planner.solver(c.solver).runs_on_user_tensor(c)
                              for c in children)
        work = Work(launches=2 * len(sizes))  # the split views
        if not direct:
            work += copy(out_elems * problem.batch, size) + (root_output(problem) if root else Work())

        def shard(c) -> float:
            if not direct:
                return _shard_time(c, planner.profile)
            unpacked = library_io(attrs.evolve(problem, batch=c.batch, cores=1), planner)  # priced in c, not made
            return (_shard_time(c, planner.profile) + _work_shard_time(copy(out_elems * c.batch, size), planner.profile)
                    - _work_shard_time(unpacked, planner.profile))

        node = self.node(problem, planner, work, max(c.error for c in children),
                         params={"shards": len(sizes)}, children=tuple(children), direct=True)
        own = planner.profile.time_us(work, str(problem.real_dtype).removeprefix("torch."))
        return attrs.evolve(node, time_us=own + max(shard(c) for c in children) + len(sizes) * TASK_US)

    def build(self, node, ctx):
        sizes = shard_sizes(node.batch, node.param("shards"))  # shards = min(cores, batch)
        return MulticoreShards([ctx.build(c) for c in node.children], [c.batch for c in node.children], sizes,
                               get_backend(ctx.device.type))


class MulticoreShards(torch.nn.Module):
    """Runs shards of the batch concurrently, one child module per distinct shard size."""

    def __init__(self, children, child_batches, sizes, backend):
        super().__init__()
        self.kids = torch.nn.ModuleList(children)
        self.by_size = {b: i for i, b in enumerate(child_batches)}
        self.sizes = tuple(sizes)
        self.backend = backend
        if all(hasattr(k, "library_call") for k in children):
            # leaf children: a plan whose root this is runs the shards on the user's tensor directly
            # (no split into re/im and back: each 1 MB temporary costs ~0.2 ms of page faults here)
            self.library_call = self._library_call

    def _library_call(self, norm: str | None = None):
        """Shards of the user-facing tensor through the children's library calls, with ``norm``;
        each shard copies its result into its rows of the output on its own core (no serial gather)."""
        calls = [k.library_call(norm) for k in self.kids]

        def run(x):
            M = x.shape[0]
            sizes = self._sizes(M)
            starts = [sum(sizes[:i]) for i in range(len(sizes))]
            out, lock = [], threading.Lock()

            def into(call, start):
                def fn(piece):
                    y = call(piece)
                    with lock:  # the first shard done allocates the output (its shape is the library's)
                        if not out:
                            out.append(y.new_empty((M, *y.shape[1:])))
                    out[0][start:start + y.shape[0]].copy_(y)
                return fn

            fns = [into(calls[self.by_size.get(s, 0)], start) for s, start in zip(sizes, starts)]
            self._dispatch(None, (x,), sizes, fns)
            return out[0]

        return run

    def forward(self, *inputs):
        outs = self._dispatch(self.kids, inputs)
        return tuple(torch.cat(parts) for parts in zip(*outs))

    def _sizes(self, M: int) -> tuple:
        """The shard sizes of a batch of ``M``: the planned ones, or ``M`` re-sharded evenly."""
        return self.sizes if M == sum(self.sizes) else shard_sizes(M, len(self.sizes))

    def _dispatch(self, fns_by_child, tensors, sizes=None, fns=None) -> list:
        """Split ``tensors`` on dim 0 into the shards, run shard i with the function of its size's
        child (or ``fns[i]``; the calling thread runs the first, the shard executor the others),
        in shard order. Another batch than the planned one (the lowered module takes any) is
        re-sharded evenly."""
        M = tensors[0].shape[0]
        if sizes is None:
            sizes = self._sizes(M)
        pieces = list(zip(*(torch.split(t, sizes) for t in tensors)))
        if fns is None:
            fns = [fns_by_child[self.by_size.get(s, 0)] for s in sizes]
        pool = self.backend.shard_executor(len(sizes))
        futures = [pool.submit(fn, *piece) for fn, piece in zip(fns[1:], pieces[1:])]
        return [fns[0](*pieces[0])] + [f.result() for f in futures]
