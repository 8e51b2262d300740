"""Plans pickle as their request + tree and are rebuilt from the plan cache on load, whatever solver
made them (a library solver's module holds closures that cannot pickle)."""

from __future__ import annotations

import copy
import io
import multiprocessing
import pickle

import numpy as np
import pytest
import torch

import trnplan
from trnplan.core.accuracy import DEFAULT_TOL, measure_error, seeded_input
from trnplan.core.errors import PlanningError
from trnplan.planner import solver_names

#: (shape, batch, plan_many options) per root solver where the default (64, batch 4, c2c) does not apply
CASES = {
    "dft-gemm": (16, 4, {}),
    "four-step": (96, 4, {}),
    "bluestein": (97, 4, {}),
    "real": (64, 4, {"kind": "r2c"}),
    "nd": ((8, 16), 4, {}),
    "multicore": (256, 4, {"cores": 2}),
    "precision": (256, 4, {"precision": "auto", "tol": 1e-3}),
}


def _plan(solver: str, **extra):
    shape, batch, options = CASES.get(solver, (64, 4, {}))
    options = {**options, **extra}
    strategy = None if solver == "precision" else solver  # "precision" is the root of every auto plan
    try:
        return trnplan.plan_many(shape, batch, strategy=strategy, **options)
    except PlanningError as exc:
        if "not installed" in str(exc) or "unavailable" in str(exc):
            pytest.skip(f"{solver}: {exc}")
        raise


def _input(plan):
    x = seeded_input(plan.problem)
    dtype = plan.problem.real_dtype if plan.problem.real_input else plan.problem.torch_dtype
    return torch.from_numpy(np.ascontiguousarray(x)).to(dtype)


@pytest.mark.parametrize("cache", ["default", "none"])
@pytest.mark.parametrize("solver", solver_names())
def test_every_solver_pickles(solver, cache):
    plan = _plan(solver, **({"cache": None} if cache == "none" else {}))
    assert plan.tree.solver == solver
    clone = pickle.loads(pickle.dumps(plan))
    assert clone is not plan
    assert clone.problem == plan.problem and str(clone.tree) == str(plan.tree)
    x = _input(plan)
    assert torch.equal(clone.execute(x), plan.execute(x))  # the same tree on the same input: bitwise
    assert measure_error(clone) <= DEFAULT_TOL[dict(plan.tree.params).get("mode", plan.problem.precision)]


def test_unpickled_plan_comes_from_the_cache_under_wisdom_only(monkeypatch):
    plan = trnplan.plan_many(1024, 8, strategy="pyfftw")
    data = pickle.dumps(plan)
    trnplan.clear_plan_cache()
    monkeypatch.setenv("TRNPLAN_WISDOM_ONLY", "1")  # production: nothing may be planned
    clone = pickle.loads(data)
    assert clone.provenance.origin == "wisdom hit"
    assert str(clone.tree) == str(plan.tree)


def test_unpickled_plan_replays_its_tree_where_the_cache_has_none(tmp_path, monkeypatch):
    plan = trnplan.plan_many(96, 2, strategy="(four-step 96=8x12 (dft-gemm 8) (pyfftw 12))")
    data = pickle.dumps(plan)
    trnplan.clear_plan_cache()
    monkeypatch.setenv("TRNPLAN_CACHE_DIR", str(tmp_path / "another-machine"))  # an empty default cache
    clone = pickle.loads(data)
    assert str(clone.tree) == str(plan.tree)
    assert clone.provenance.cache_path == str(tmp_path / "another-machine")


class Spectral(torch.nn.Module):
    """A layer holding a library-solver plan (whose module alone cannot pickle)."""

    def __init__(self):
        super().__init__()
        self.plan = trnplan.plan_many(256, 4, strategy="pyfftw")
        self.weight = torch.nn.Parameter(torch.ones(256))

    def forward(self, x):
        return self.plan.execute(x * self.weight).abs()


def test_torch_save_of_a_module_holding_a_plan():
    model = Spectral()
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)  # a whole pickled module: never weights_only
    x = torch.randn(4, 256, dtype=torch.complex64)
    assert torch.equal(loaded(x), model(x))


def _child_fft(plan, x):
    return plan.execute(x)


@pytest.mark.slow  # a spawned interpreter imports torch (seconds)
def test_multiprocessing_spawn_passes_a_library_plan():
    plan = trnplan.plan_many(512, 3, strategy="pyfftw")
    x = torch.randn(3, 512, dtype=torch.complex64)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        y = pool.apply(_child_fft, (plan, x))
    assert torch.equal(y, plan.execute(x))


def test_a_plan_not_made_by_plan_many_refuses_to_pickle():
    plan = trnplan.plan_many(64, 1)
    orphan = trnplan.Plan(plan.problem, plan.tree, plan.candidates, plan.module, plan.device,
                          provenance=plan.provenance, strategy=None, tol=plan.tol, profile_name=plan.profile_name)
    with pytest.raises(TypeError, match="not made by trnplan.plan_many"):
        pickle.dumps(orphan)


@pytest.mark.parametrize("kind, shape, n_in, n_out", [("c2c", (64,), 64, 64), ("r2c", (64,), 64, 33),
                                                       ("c2r", (8, 64), 33, 64)])
def test_shape_attributes(kind, shape, n_in, n_out):
    plan = trnplan.plan_many(shape, 5, kind=kind)
    assert plan.batch == 5
    assert plan.input_shape == (5, *shape[:-1], n_in)
    assert plan.output_shape == (5, *shape[:-1], n_out)
    x = torch.randn(plan.input_shape, dtype=torch.float32 if kind == "r2c" else torch.complex64)
    assert tuple(plan.execute(x).shape) == plan.output_shape


def test_copy_and_deepcopy_share_the_executable():
    model = Spectral()
    plan = model.plan
    for clone in (copy.copy(plan), copy.deepcopy(plan), copy.deepcopy(model).plan):
        assert clone is not plan and type(clone) is trnplan.Plan
        assert clone.module is plan.module  # shared, not re-planned
        x = torch.randn(4, 256, dtype=torch.complex64)
        assert torch.equal(clone.execute(x), plan.execute(x))
