"""A device is one file and one registry line: the toy backend (tests/toy_backend.py) plans,
runs and explains through the whole plan_many path with nothing else changed."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import BAR, random_complex, reference, rel_l2
from toy_backend import NO_COMPLEX, ToyBackend

import trnplan
from trnplan.backends import get_backend, register_backend, unregister_backend
from trnplan.core.errors import ComplexOnDevice, PlanningError


@pytest.fixture
def toy():
    backend = ToyBackend()
    register_backend(backend)  # the one registry line
    yield backend
    unregister_backend("toy")


def test_a_device_kind_without_a_backend_is_refused():
    with pytest.raises(ValueError, match="device must be one of .*got 'toy'"):
        trnplan.plan_many(64, 4, device="toy")


@pytest.mark.parametrize("n", [1, 3, 64, 97, 120])
def test_the_toy_device_plans_and_runs_through_plan_many(toy, n):
    plan = trnplan.plan_many(n, 4, device="toy")
    assert get_backend("toy") is toy and plan.request.backend is toy and plan.device == torch.device("cpu")
    assert all(node.solver != "native" for _, node in plan.tree.walk())  # no native FFT on the toy
    assert toy.built == [plan.problem]
    x = random_complex((4, n), seed=n)
    re, im = plan.execute_split((torch.from_numpy(x.real).float(), torch.from_numpy(x.imag).float()))
    assert rel_l2(torch.complex(re, im), reference(x, False)) <= BAR["fp32"]
    assert plan._runner.calls == 1  # the toy's runner ran it
    assert trnplan.plan_many(n, 4, device="toy") is plan and len(toy.built) == 1  # in-process hit: not rebuilt


def test_the_toy_backend_owns_the_boundary_fingerprint_and_explain(toy):
    plan = trnplan.plan_many(64, 2, device="toy")
    with pytest.raises(ComplexOnDevice, match=NO_COMPLEX):
        plan.execute(torch.zeros(2, 64, dtype=torch.complex64))
    fp = plan.provenance.fingerprint
    assert fp["device"] == "toy" and fp["toy_runtime"] == "1.0"
    assert "runs on    the toy device" in plan.explain(full=True)
    with pytest.raises(PlanningError, match="precision='fp64' is not available on toy"):
        trnplan.plan_many(64, 2, device="toy", dtype=torch.complex128)


def test_the_adjoint_and_a_pickled_plan_stay_on_the_toy_device(toy):
    import pickle

    plan = trnplan.plan_many(32, 2, device="toy")
    assert plan.adjoint().request.backend is toy
    again = pickle.loads(pickle.dumps(plan))
    assert again.request.backend is toy and str(again.tree) == str(plan.tree)
    x = random_complex((2, 32), seed=1)
    parts = (torch.from_numpy(x.real).float(), torch.from_numpy(x.imag).float())
    assert np.array_equal(torch.complex(*again.execute_split(parts)).numpy(),
                          torch.complex(*plan.execute_split(parts)).numpy())
