"""``xla`` as on a trn1/inf2 (a fake torch-neuronx 2.9 distribution: tests/xla/conftest.py ``trn1``),
on XLA:CPU, with every graph a test compiled audited against neuronx-cc's documented limits.

* item 1: the default route is lazy XLA (torch-neuronx 2.9 has no torch.compile); openxla only when asked;
* item 2: complex tensors in or out are refused naming ``execute_split``; ``execute_split`` runs c2c,
  r2c and c2r of every rank within the fp32 bar, with autograd, and no graph holds c64/c128/f64/s64;
* item 3: batch sizes 1..16 of one transform compile at most one graph per bucket (the pad and crop
  of a bucket run on the host), counted with torch_xla.debug.metrics.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch_xla
from support import rel_l2

import trnplan
from trnplan.backends import accel
from trnplan.core.accuracy import DEFAULT_TOL
from trnplan.core.errors import ComplexOnDevice
from trnplan.tools import xla_audit

pytestmark = pytest.mark.xla
DEV = torch_xla.device()


def _split(plan, x: np.ndarray):
    """execute_split of host data ``x`` on the device; the result on the host as numpy."""
    f32 = plan.problem.real_dtype

    def put(a):
        return torch.from_numpy(np.ascontiguousarray(a)).to(f32).to(DEV)

    y = plan.execute_split(put(x) if plan.problem.real_input else (put(x.real), put(x.imag)))
    if isinstance(y, tuple):
        return y[0].cpu().double().numpy() + 1j * y[1].cpu().double().numpy()
    return y.cpu().double().numpy()


def test_trn1_defaults_to_lazy_xla_and_openxla_only_when_asked(trn1):
    plan = trnplan.plan_many(256, 4, device="xla", cache=None)
    assert plan.provenance.compile_mode == "lazy", plan.provenance.compile_reason
    assert "torch-neuronx 2.9 (trn1/inf2) has no torch.compile" in plan.explain(full=True)
    asked = trnplan.plan_many(256, 4, device="xla", compile="dynamo", cache=None)
    assert asked.provenance.compile_mode == "dynamo"
    assert "which torch-neuronx 2.9 does not support" in asked.provenance.compile_reason


@pytest.mark.parametrize("kind", ["c2c", "r2c", "c2r"])
def test_complex_in_or_out_is_refused_naming_execute_split(trn1, kind):
    plan = trnplan.plan_many(64, 2, kind=kind, device="xla", cache=None)
    shape = (2, *plan.problem.in_shape)
    x = torch.zeros(shape) if plan.problem.real_input else torch.zeros(shape, dtype=torch.complex64)
    with pytest.raises(ComplexOnDevice, match=r"plan\.execute_split\(.*NCC_EVRF004|NCC_EVRF004.*plan\.execute_split\("):
        plan.execute(x.to(DEV))
    if kind == "c2c":
        with pytest.raises(ComplexOnDevice, match=r"execute_split"):
            trnplan.fft.fft(x.to(DEV))


CASES = [((256,), "c2c", "dft-gemm"), ((1024,), "c2c", "butterfly"), ((1024,), "r2c", None), ((64,), "c2r", None),
         ((16, 32), "c2c", None), ((8, 16, 16), "c2r", None)]


@pytest.mark.parametrize("shape,kind,strategy", CASES, ids=lambda v: str(v))
def test_execute_split_on_trn1_within_the_fp32_bar(trn1, shape, kind, strategy):
    plan = trnplan.plan_many(shape, 4, kind=kind, strategy=strategy, device="xla", cache=None)
    g = np.random.default_rng(0)
    axes = tuple(range(1, len(shape) + 1))
    if kind == "c2r":
        x = np.fft.rfftn(g.standard_normal((4, *shape)), axes=axes)
        ref = np.fft.irfftn(x, s=shape, axes=axes)
    elif kind == "r2c":
        x = g.standard_normal((4, *shape))
        ref = np.fft.rfftn(x, axes=axes)
    else:
        x = g.standard_normal((4, *shape)) + 1j * g.standard_normal((4, *shape))
        ref = np.fft.fftn(x, axes=axes)
    before = xla_audit._fallback_counts()
    err = rel_l2(_split(plan, x), ref)
    fallback = sorted(op for op, n in xla_audit._fallback_counts().items() if n > before.get(op, 0))
    assert err <= DEFAULT_TOL["fp32"], f"{plan.tree}: {err:.3g}"
    assert fallback == [], fallback


def test_autograd_through_execute_split_on_trn1(trn1):
    plan = trnplan.plan_many(128, 4, device="xla", cache=None)
    g = np.random.default_rng(1)
    re_h, im_h = (torch.from_numpy(g.standard_normal((4, 128))).float() for _ in range(2))
    re, im = re_h.to(DEV).requires_grad_(), im_h.to(DEV).requires_grad_()
    yr, yi = plan.execute_split((re, im))
    (yr.square() + yi.square()).sum().backward()  # gradient 2 n (re, im): Parseval
    got = re.grad.cpu().double().numpy() + 1j * im.grad.cpu().double().numpy()
    assert rel_l2(got, 2 * 128 * (re_h.double().numpy() + 1j * im_h.double().numpy())) <= DEFAULT_TOL["fp32"]


def test_batches_1_to_16_compile_at_most_one_graph_per_bucket(trn1):
    trnplan.plan_many(32, 2, device="xla", cache=None)  # the precision probe's graph: once per process
    g = np.random.default_rng(2)
    buckets = {accel.bucket_batch(b) for b in range(1, 17)}
    with xla_audit.CompileCounter() as count:
        for b in range(1, 17):
            plan = trnplan.plan_many(64, b, device="xla", cache=None)
            x = g.standard_normal((b, 64)) + 1j * g.standard_normal((b, 64))
            assert rel_l2(_split(plan, x), np.fft.fft(x)) <= DEFAULT_TOL["fp32"]
    print(f"XLA-LANE trn1 batches 1..16: {count.uncached} XLA compiles for {len(buckets)} buckets "
          f"{sorted(buckets)} (lazy route)")
    assert count.uncached <= len(buckets), (count.uncached, sorted(buckets))


@pytest.mark.parametrize("kind", ["c2c", "r2c"])
def test_measured_planning_times_candidates_through_the_lazy_split_route(trn1, kind):
    """effort="measure" on a trn1: each candidate compiled by the lazy route (one graph each, its
    input split on the host), timed and checked against numpy; every graph it ran is audited by the
    trn1 fixture (no c64/c128/f64/s64), and the plan then runs within the fp32 bar."""
    plan = trnplan.plan_many(64, 4, device="xla", kind=kind, effort="measure", cache=None)
    timed = [t for t in plan.provenance.measurement.timings if t.measured_us is not None]
    assert plan.provenance.compile_mode == accel.LAZY and plan.provenance.effort == "measure"
    assert len(timed) >= 2 and all(t.measured_error <= plan.tol for t in timed), timed
    x = np.random.default_rng(3).standard_normal((4, 64))
    x = x if kind == "r2c" else x + 1j * np.random.default_rng(4).standard_normal((4, 64))
    ref = np.fft.rfft(x) if kind == "r2c" else np.fft.fft(x)
    assert rel_l2(_split(plan, x), ref) <= DEFAULT_TOL["fp32"]


def test_first_run_script_passes_on_the_trn1_stand_in(tmp_path):
    """bench/first_run_xla.py, both of its processes, against XLA:CPU dressed as a trn1 (the fake
    torch-neuronx 2.9 distribution): every asserted step passes (no NEFFs here: "zero new" is trivial)."""
    import json
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    site = tmp_path / "site"  # the trn1 fixture's distributions (conftest.TRN1_DISTRIBUTIONS), for the child
    for name, version in {"torch_neuronx": "2.9.0.2.15.32035", "neuronx_cc": "2.21.33363.0",
                          "libneuronxla": "2.2.14584.0"}.items():
        (site / f"{name}-{version}.dist-info").mkdir(parents=True)
        (site / f"{name}-{version}.dist-info" / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
    env = {**os.environ, "FIRST_RUN_PRELUDE": "trn1_prelude:trn1", "TRN1_SITE": str(site),
           "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests" / "xla"), os.environ.get("PYTHONPATH", "")]),
           "TRNPLAN_CACHE_DIR": str(tmp_path / "c"), "NEURON_CC_FLAGS": ""}
    env.pop("XLA_FLAGS", None)  # the child's graphs are not this test's to audit
    run = subprocess.run([sys.executable, str(root / "bench" / "first_run_xla.py"), "--cache-dir", str(tmp_path / "c")],
                         capture_output=True, text=True, env=env, timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    steps = {r["step"]: r for r in (json.loads(line[len("FIRST-RUN-RESULT "):]) for line in run.stdout.splitlines()
                                    if line.startswith("FIRST-RUN-RESULT "))}
    assert {"plans", "openxla", "complex", "warm", "operators"} <= set(steps), steps
    assert [r["route"] for r in steps["plans"]["rows"]] == ["lazy", "lazy"] and steps["plans"]["ok"]
    assert steps["complex"]["refused"] and "execute_split" in steps["complex"]["message"]
    assert steps["warm"]["ok"] and steps["warm"]["origins"] == ["wisdom hit", "wisdom hit"]
    assert "xla on Neuron: True; default route: lazy" in run.stdout and "PJRT device: CPU" in run.stdout
    print(run.stdout[-2500:])
