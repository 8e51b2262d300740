"""bench/first_run_torchneuron.py against the strict TorchNeuron stand-in (tests/neuron_device_standin.py):
the script a trn2 runs first passes here, both of its processes, every step. The xla script runs in
the torch-xla lane (tests/xla/test_trn1_xla.py); the trace route's script in tests/test_neuron.py.
What this cannot show: neuronx-cc, NEFFs (the stand-in writes none: "zero new" is trivially true
here), Trainium numerics."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULT = "FIRST-RUN-RESULT "


@pytest.mark.slow
def test_torchneuron_first_run_passes_on_the_strict_stand_in(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]),
           "FIRST_RUN_PRELUDE": "neuron_device_standin:first_run_prelude",
           "TRNPLAN_CACHE_DIR": str(tmp_path / "c")}
    env.pop("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", None)
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "first_run_torchneuron.py"), "--cache-dir",
                          str(tmp_path / "c")], capture_output=True, text=True, env=env, timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    steps = {r["step"]: r for r in (json.loads(line[len(RESULT):]) for line in run.stdout.splitlines()
                                    if line.startswith(RESULT))}
    assert set(steps) == {"plans", "fallback", "probe", "warm"} and all(s["ok"] for s in steps.values()), steps
    assert [r["route"] for r in steps["plans"]["rows"]] == ["dynamo", "dynamo"]
    assert steps["fallback"]["fallback_ops"] == [] and steps["fallback"]["disable_fallback"] == "1"
    assert steps["warm"]["origins"] == ["wisdom hit", "wisdom hit"] and steps["warm"]["new_neffs"] == 0
    assert "PJRT device: neuron" in run.stdout and "torch-neuronx" in run.stdout
    print(run.stdout[-3000:])
