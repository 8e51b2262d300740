"""cores=C: the multicore solver splits the batch into shards run concurrently by child plans,
a single transform is split through its four-step / nd passes, the cost model decides, explain()
shows the shards. Every result is checked against numpy.fft in complex128."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from support import BAR, random_complex, rel_l2

import trnplan
from trnplan.core.accuracy import measure_error
from trnplan.core.cost import Work
from trnplan.planner import registry
from trnplan.planner.multicore import shard_sizes
from trnplan.planner.native import Native
from trnplan.planner.solver import Solver

DT = {"fp32": torch.complex64, "fp64": torch.complex128}


@pytest.mark.parametrize("batch,cores,sizes", [(8, 2, (4, 4)), (5, 3, (2, 2, 1)), (2, 4, (1, 1)), (7, 7, (1,) * 7)])
def test_shard_sizes(batch, cores, sizes):
    assert shard_sizes(batch, cores) == sizes


@pytest.mark.parametrize("precision", ["fp32", "fp64"])
@pytest.mark.parametrize("shape,kind,batch,cores", [
    ((1024,), "c2c", 8, 2), ((97,), "c2c", 5, 3), ((100,), "r2c", 6, 2), ((64,), "c2r", 7, 2),
    ((16, 24), "c2c", 4, 2), ((8, 12, 10), "r2c", 3, 2), ((12, 9), "c2r", 5, 4),
])
def test_forced_multicore_matches_numpy(shape, kind, batch, cores, precision):
    plan = trnplan.plan_many(shape, batch=batch, kind=kind, cores=cores, strategy="multicore",
                             dtype=DT[precision], cache=None)
    assert plan.tree.solver == "multicore"
    assert plan.tree.param("shards") == min(cores, batch)
    assert {c.batch for c in plan.tree.children} == set(shard_sizes(batch, cores))
    assert all(c.solver != "multicore" for _, c in list(plan.tree.walk())[1:])  # no recursion
    assert measure_error(plan) <= BAR[precision]


@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_multicore_norms_and_directions(norm, inverse):
    plan = trnplan.plan_many(256, batch=6, cores=2, strategy="multicore", norm=norm, inverse=inverse, cache=None)
    x = random_complex((6, 256), seed=1)
    ref = (np.fft.ifft if inverse else np.fft.fft)(x, norm=norm)
    assert rel_l2(plan.execute(torch.from_numpy(x).to(torch.complex64)), ref) <= BAR["fp32"]


class _Rendezvous(torch.nn.Module):
    def __init__(self, solver):
        super().__init__()
        self.solver = solver

    def forward(self, re, im):
        self.solver.threads.add(threading.get_ident())
        self.solver.barrier.wait()  # returns only when every shard is running at the same time
        y = torch.fft.fft(torch.complex(re, im))
        return y.real, y.imag


class RendezvousSolver(Solver):
    """Test-only leaf whose module blocks until all shards have arrived (proves concurrency)."""

    name = "rendezvous"

    def __init__(self, parties):
        self.barrier = threading.Barrier(parties, timeout=20)
        self.threads = set()

    def why_not(self, problem, planner, forced):
        return None if forced else "test solver: forced only"

    def plan(self, problem, planner, spec):
        return self.node(problem, planner, Work(launches=1), Native().plan(problem, planner, spec).error)

    def build(self, node, ctx):
        return _Rendezvous(self)


def test_shards_run_concurrently_on_worker_threads():
    solver = RendezvousSolver(parties=3)
    registry.register(solver)
    try:
        plan = trnplan.plan_many(64, batch=9, cores=3, strategy="(multicore (rendezvous))", cache=None)
        x = random_complex((9, 64), seed=2)
        y = plan.execute(torch.from_numpy(x).to(torch.complex64))  # a barrier timeout would raise here
    finally:
        registry.unregister(solver.name)
    assert len(solver.threads) == 3 and threading.get_ident() in solver.threads  # the caller runs one shard
    assert rel_l2(y, np.fft.fft(x)) <= BAR["fp32"]


def test_one_large_transform_is_split_through_the_four_step_passes():
    plan = trnplan.plan_many(65536, batch=1, cores=2, cache=None,
                             strategy="(four-step 65536=256x256 (multicore) (multicore))")
    kids = plan.tree.children
    assert [k.solver for k in kids] == ["multicore", "multicore"] and [k.batch for k in kids] == [256, 256]
    assert measure_error(plan) <= BAR["fp32"]
    # and an nd plan splits its axis passes the same way
    nd = trnplan.plan_many((64, 32), batch=1, cores=2, cache=None,
                           strategy="(nd 2048=64x32 method=rowcol (multicore) (multicore))")
    assert measure_error(nd) <= BAR["fp32"]


def test_the_cost_model_does_not_split_small_work():
    plan = trnplan.plan_many(16, batch=2, cores=2, cache=None)
    assert all(node.solver != "multicore" for _, node in plan.tree.walk())
    line = next(l for l in plan.explain(full=True).splitlines() if l.strip().startswith("cores"))
    assert "no node splits its batch" in line and "predicted at" in line


def test_a_per_core_profile_splits_large_batches():
    from trnplan.backends.cpu import CPU_PROFILE, CPUBackend
    from trnplan.core.problem import Problem
    from trnplan.planner import Planner

    class PerCore(CPUBackend):  # a backend whose constants are per core (as a NeuronCore's)
        profile = CPU_PROFILE.__class__(**{**{a: getattr(CPU_PROFILE, a) for a in
                                             ("name", "launch_us", "gemm_gflops", "fft_gflops", "bandwidth_gbs",
                                              "fft_launch_us", "source")}, "threads": 1})

    big = Planner(PerCore()).plan(Problem.create(4096, 256, cores=4))
    assert big.solver == "multicore" and big.param("shards") == 4
    small = Planner(PerCore()).plan(Problem.create(16, 2, cores=4))
    assert small.solver != "multicore"


def test_explain_shows_the_shards_and_the_child_plan():
    plan = trnplan.plan_many(1024, batch=5, cores=2, strategy="multicore", cache=None)
    text = plan.explain(full=True)
    assert "2 cores" in text and "multicore n=1024 [shards=2]" in text
    line = next(l for l in text.splitlines() if l.strip().startswith("cores"))
    assert "2 shards of 3/2" in line and "per-core child (" in line


def test_measure_times_the_split_candidate():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        plan = trnplan.plan_many(512, batch=64, cores=2, effort="measure", cache=None)
    finally:
        torch.set_num_threads(threads)
    timed = {t.solver for t in plan.provenance.measurement.timings if t.measured_us is not None}
    assert "multicore" in timed
    assert measure_error(plan) <= BAR["fp32"]


def test_gradients_flow_through_shards():
    plan = trnplan.plan_many(32, batch=4, cores=2, strategy="multicore", dtype=torch.complex128, cache=None)
    x = torch.from_numpy(random_complex((4, 32), seed=3)).requires_grad_()
    assert torch.autograd.gradcheck(plan.execute, (x,), eps=1e-6, atol=1e-8)
    assert plan.adjoint().problem.cores == 2


def test_pair_form_and_another_batch_through_the_split_module():
    plan = trnplan.plan_many(128, batch=6, cores=4, strategy="multicore", cache=None)
    x = random_complex((6, 128), seed=4)
    t = torch.from_numpy(x).to(torch.complex64)
    re, im = plan.execute((t.real.contiguous(), t.imag.contiguous()))
    assert rel_l2(torch.complex(re, im), np.fft.fft(x)) <= BAR["fp32"]
    # the lowered module takes any batch (it re-shards evenly)
    y = plan.module(t[:3].real.contiguous(), t[:3].imag.contiguous())
    assert rel_l2(torch.complex(*y), np.fft.fft(x[:3])) <= BAR["fp32"]
