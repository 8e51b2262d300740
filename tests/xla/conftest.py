"""The torch-xla lane's fixtures (.ci/xla_lane.sh runs these tests on torch 2.9 + torch-xla 2.9).

Outside the lane (torch 2.13 without torch-xla) every test here is skipped at collection. Inside
it (``TRNPLAN_XLA_LANE_RUNNING=1``) a missing torch-xla is an import error, never a skip: a lane
that tests nothing must not pass.

``PJRT_DEVICE`` defaults to ``CPU`` only where no Neuron runtime is present: on a trn1/inf2 with
the XLA-based torch-neuronx and Neuron device files these tests run on the NeuronCores (PJRT's
Neuron plugin), so that a test run on a trn1 tests the trn1. The test header names the PJRT device.

Every graph torch-xla compiles is dumped as HLO text (``XLA_FLAGS=--xla_dump_to=DIR
--xla_dump_hlo_as_text``, set here before the PJRT client starts, unless the user set a dump
directory): the ``trn1`` fixture audits every graph a test ran, not only a plan's module.
"""

from __future__ import annotations

import os
import pathlib
import tempfile

import pytest

from trnplan.backends import neuron_runtime

if os.environ.get("TRNPLAN_XLA_LANE_RUNNING") == "1":
    import torch_xla  # noqa: F401 - the lane must fail loudly without it
else:
    pytest.importorskip("torch_xla", reason="torch-xla is not installed here; .ci/xla_lane.sh runs these tests")

_RUNTIME = neuron_runtime.detect()
#: a real Neuron runtime: the XLA-based torch-neuronx with torch-xla, and a Neuron device file
ON_NEURON = _RUNTIME.kind == "xla-trace" and _RUNTIME.chips > 0
if not ON_NEURON:
    os.environ.setdefault("PJRT_DEVICE", "CPU")
if "--xla_dump_to" not in os.environ.get("XLA_FLAGS", ""):
    DUMP_DIR = tempfile.mkdtemp(prefix="trnplan-xla-dump-")
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={DUMP_DIR} --xla_dump_hlo_as_text".strip()
else:
    DUMP_DIR = next(f.split("=", 1)[1] for f in os.environ["XLA_FLAGS"].split() if f.startswith("--xla_dump_to="))

#: torch-neuronx 2.9 on torch-xla (trn1/inf2) and its compiler, as pip would install them: the
#: distribution metadata trnplan's runtime detection reads (runtimes.md rule 9), nothing importable
TRN1_DISTRIBUTIONS = {"torch-neuronx": "2.9.0.2.15.32035", "neuronx-cc": "2.21.33363.0", "libneuronxla": "2.2.14584.0"}


def pytest_report_header(config):
    return (f"PJRT device: {os.environ.get('PJRT_DEVICE', '(unset: the Neuron plugin picks)')}; Neuron runtime: "
            f"{_RUNTIME.kind or 'none'} ({_RUNTIME.chips} device file(s)); HLO dumps: {DUMP_DIR}")


def write_distributions(root, versions: dict) -> str:
    """Distribution metadata (``<name>-<version>.dist-info/METADATA``) under ``root``; the site dir."""
    site = pathlib.Path(root) / "site"
    for name, version in versions.items():
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return str(site)


@pytest.fixture
def trn1(tmp_path, monkeypatch):
    """``xla`` as a trn1 sees it: a fake torch-neuronx 2.9 distribution (so trnplan detects the
    XLA-based Neuron runtime: lazy default, split boundary, Neuron fingerprints), fresh plan and
    runner caches, and after the test every graph it compiled audited against neuronx-cc's limits
    (no c64/c128/f64/s64, only listed ops). Yields the list of graphs audited (file names)."""
    import trnplan
    from trnplan.backends import accel
    from trnplan.core import config
    from trnplan.tools import xla_audit

    before = set()
    xla_audit.audit_dump(DUMP_DIR, before)  # graphs of earlier tests: not this test's
    monkeypatch.syspath_prepend(write_distributions(tmp_path, TRN1_DISTRIBUTIONS))
    # PJRT_DEVICE as on a trn1 (unset: torch-neuronx's Neuron plugin), for trnplan only: the runtime
    # of this process keeps running XLA:CPU, which it was started with
    monkeypatch.setattr(config, "pjrt_device", lambda: None)
    assert accel.xla_on_neuron(), "the fake torch-neuronx 2.9 distribution was not detected"
    trnplan.clear_plan_cache()
    accel.clear_runners()
    accel.reset_compile_cache()  # each test has its own plan cache (tests/conftest.py): a fresh process's state
    audited: list = []
    yield audited
    trnplan.clear_plan_cache()
    accel.clear_runners()
    accel.reset_compile_cache()
    found = xla_audit.audit_dump(DUMP_DIR, before)
    audited.extend(found)
    bad = {name: f for name, f in found.items() if f}
    assert not bad, f"graphs a NeuronCore would refuse: {bad}"
    print(f"XLA-LANE trn1: {len(found)} executed graph(s) audited, all within neuronx-cc's limits")


