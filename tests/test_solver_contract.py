"""The solver contract: adding a solver is one class and one registry line (docs/architecture.md).

A toy solver — the direct DFT as two real GEMMs, written here the way a user's module would be —
is registered, planned (forced and in the free search), executed against numpy.fft in float64,
explained, refused where its declared capabilities say so (with the typed error carrying the
candidates), found by bench/accuracy.py without editing it, and unregistered.
"""

from __future__ import annotations

import importlib.util
import math
import pathlib
from typing import ClassVar

import numpy as np
import pytest
import torch
from support import reference, rel_l2

import trnplan
from trnplan.core.accuracy import DEFAULT_TOL, UNIT_ROUNDOFF, sqrt_growth
from trnplan.core.cost import Work
from trnplan.core.errors import OverBoundError, PlanningError
from trnplan.kernels import dft_matrix
from trnplan.planner import registry
from trnplan.planner.planner import NOT_APPLICABLE, OVER_BOUND
from trnplan.planner.solver import Solver, itemsize

ROOT = pathlib.Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------- the one file a solver is
class ToyDFTModule(torch.nn.Module):
    """(re, im) of shape (M, n) -> the unscaled DFT, as (xr + i xi)(C + i S) with two real GEMMs each."""

    def __init__(self, c: torch.Tensor, s: torch.Tensor):
        super().__init__()
        self.register_buffer("c", c)
        self.register_buffer("s", s)

    def forward(self, re, im):
        return re @ self.c - im @ self.s, re @ self.s + im @ self.c


class ToyDFT(Solver):
    """A direct DFT for n <= MAX_N: declares its kinds, ranks and precisions; the planner checks them."""

    name = "toy-dft"
    version = 1
    kinds = ("c2c",)
    ranks = "1"
    precisions = ("fp32", "fp64")
    precision_refusal = "toy-dft computes in {modes} only, not {precision}"
    MAX_N = 64
    #: error constant c of c·u·√n (n-term dot products) per precision, fitted with bench/accuracy.py's
    #: solvers section (test_bench_accuracy_... below runs it): at c = 2 the worst measured/predicted
    #: ratio was 0.35 (fp32) and 0.80 (fp64), both at batch 4 × n = 3, so fp32's c is halved
    ERROR_C: ClassVar[dict] = {"fp32": 1.0, "fp64": 2.0}

    def why_not(self, problem, planner, forced):
        if problem.n > self.MAX_N:
            return f"n={problem.n} is over the toy's n ≤ {self.MAX_N}"
        return None

    def plan(self, problem, planner, spec):
        n, b = problem.n, problem.batch
        work = Work(launches=6, gemm_flops=4 * 2.0 * n * n * b, bytes=6 * n * b * itemsize(problem))
        error = self.ERROR_C[problem.precision] * UNIT_ROUNDOFF[problem.precision] * sqrt_growth(n)
        return self.node(problem, planner, work, error)

    def build(self, node, ctx):
        c, s = ctx.split_const(dft_matrix(node.n, 1 if node.inverse else -1))
        return ToyDFTModule(c, s)


@pytest.fixture
def toy():
    solver = ToyDFT()
    registry.register(solver)
    trnplan.clear_plan_cache()
    try:
        yield solver
    finally:
        registry.unregister(solver.name)
        trnplan.clear_plan_cache()


# ---------------------------------------------------------------------- registration
def test_the_exported_registry_is_live_after_register_and_unregister(toy):
    assert trnplan.SOLVERS is registry.SOLVERS  # one object: trnplan.SOLVERS cannot go stale
    assert "toy-dft" in trnplan.SOLVERS and trnplan.SOLVERS["toy-dft"] is toy
    assert trnplan.solver_names()[-1] == "toy-dft"
    registry.unregister("toy-dft")
    try:
        assert "toy-dft" not in trnplan.SOLVERS and "toy-dft" not in trnplan.solver_names()
    finally:
        registry.register(toy)  # the fixture unregisters it


def test_registering_changes_the_registry_digest_so_old_wisdom_is_not_trusted():
    before = registry.registry_digest()
    registry.register(ToyDFT())
    try:
        assert registry.registry_digest() != before
    finally:
        registry.unregister("toy-dft")
    assert registry.registry_digest() == before


# ---------------------------------------------------------------------- planning and executing
@pytest.mark.parametrize("dtype,precision", [(torch.complex64, "fp32"), (torch.complex128, "fp64")])
@pytest.mark.parametrize("n", [1, 7, 64])
@pytest.mark.parametrize("inverse,norm", [(False, "backward"), (True, "ortho")])
def test_a_registered_solver_plans_and_executes_forced(toy, n, dtype, precision, inverse, norm):
    plan = trnplan.plan_many(n, batch=3, dtype=dtype, inverse=inverse, norm=norm, strategy="toy-dft", cache=None)
    assert plan.tree.solver == "toy-dft" and str(plan.tree).startswith("(toy-dft")
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, n)) + 1j * rng.standard_normal((3, n))
    y = plan.execute(torch.from_numpy(x).to(dtype)).numpy().astype(np.complex128)
    err = rel_l2(y, reference(x, inverse, norm))
    assert err <= DEFAULT_TOL[precision], f"toy-dft n={n} {precision}: {err:.2e}"
    assert err <= plan.tree.error  # its own predicted bound holds
    assert "toy-dft" in plan.explain(full=True)


def test_the_free_search_asks_a_registered_solver_and_explain_lists_its_verdict(toy):
    plan = trnplan.plan_many(16, batch=2, cache=None)
    verdicts = {c.solver: c for c in plan.candidates}
    assert "toy-dft" in verdicts and verdicts["toy-dft"].node is not None  # it applied and was priced
    assert "toy-dft" in plan.explain(full=True)
    over = trnplan.plan_many(128, batch=2, cache=None)
    toy_at_128 = next(c for c in over.candidates if c.solver == "toy-dft")
    assert toy_at_128.verdict == NOT_APPLICABLE and "over the toy's n ≤ 64" in toy_at_128.reason


# ---------------------------------------------------------------------- declared capabilities
def test_declared_precisions_are_enforced_by_the_planner_with_the_solvers_own_refusal(toy):
    with pytest.raises(PlanningError, match=r"toy-dft: toy-dft computes in fp32/fp64 only, not bf16") as info:
        trnplan.plan_many(16, precision="bf16", strategy="toy-dft", cache=None)
    assert [(c.solver, c.verdict) for c in info.value.candidates] == [("toy-dft", NOT_APPLICABLE)]


def test_a_tol_out_of_reach_raises_the_typed_error_with_the_candidates(toy):
    with pytest.raises(OverBoundError) as info:
        trnplan.plan_many(16, strategy="toy-dft", tol=1e-30, cache=None)
    candidates = {c.solver: c for c in info.value.candidates}
    assert candidates["toy-dft"].verdict == OVER_BOUND
    assert candidates["toy-dft"].node.error > 1e-30 and info.value.tol == 1e-30
    assert "out of reach" in str(info.value)  # the pipeline named the reachable bound


def test_a_solver_is_not_host_only_unless_it_declares_it(toy):
    assert toy.host_only is False
    assert {s.name for s in trnplan.SOLVERS if s.host_only} == {"scipy", "pyfftw", "mkl-fft"}


# ---------------------------------------------------------------------- its error constant is fitted by a bench that finds it
def test_bench_accuracy_finds_a_registered_solver_without_being_edited(toy):
    spec = importlib.util.spec_from_file_location("bench_accuracy", ROOT / "bench" / "accuracy.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert "toy-dft" in bench.strategies()
    rows = bench.solvers_section([1], np.random.default_rng(0), ["fp32"], names=["toy-dft"])
    sizes = sorted({r["n"] for r in rows if r["strategy"] == "toy-dft"})
    assert sizes and max(sizes) <= ToyDFT.MAX_N
    assert all(math.isfinite(r["error"]) and r["ratio"] < 1 for r in rows)  # the prediction bounds each measurement
