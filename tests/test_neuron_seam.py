"""The Neuron artifact seam, exercised with a stand-in for torch-neuronx (not installable here).

What this proves: the module trnplan would hand to ``torch_neuronx.trace`` is traceable, it is
traced with fp32 matmuls kept fp32 (``--auto-cast none``) for the configured ``--target``, the
TorchScript bytes survive the plan cache, and the loaded artifact computes the transform. What it
cannot prove: that neuronx-cc compiles it, or how it runs on a NeuronCore — nothing here has run
on Trainium. The whole Neuron path (buckets, cores, fresh-process load, host fallback) is tested
with a module-finder stand-in in tests/test_neuron.py; this file keeps the smallest seam check.
"""

from __future__ import annotations

import sys
import types

import torch
from support import BAR, random_complex, reference, rel_l2

from trnplan.backends import get_backend
from trnplan.backends.artifacts import example_inputs
from trnplan.backends.base import clear_probe_cache
from trnplan.cache import PlanCache, fingerprint
from trnplan.core.problem import Problem
from trnplan.core.spec import Spec
from trnplan.planner import Planner


def test_neuron_artifact_round_trip_with_a_stand_in(monkeypatch, tmp_path):
    calls = []

    def trace(module, example, compiler_args=None, **kwargs):  # TEST-ONLY stand-in: no compiler runs
        calls.append((compiler_args, kwargs))
        return torch.jit.trace(module, example)

    monkeypatch.setenv("TRNPLAN_NEURON_TARGET", "trn1")
    monkeypatch.setenv("TRNPLAN_NEURON_DEVICE_FILES", str(tmp_path / "no-device-*"))  # a build host
    monkeypatch.setenv("TRNPLAN_NEURON_PROBE", "0")  # the assumed probe: no extra trace call
    clear_probe_cache()
    monkeypatch.setitem(sys.modules, "torch_neuronx", types.SimpleNamespace(trace=trace))
    backend = get_backend("neuron")
    assert backend.resolve_compile("auto")[0] == "neuron"
    n, batch = 256, 4
    problem = Problem.create(n, batch, device="neuron")
    planner = Planner(backend)
    # forced: at this size the cost model prefers the host fallback (a host library, never traced)
    tree = planner.plan(problem, Spec(name="dft-gemm"))
    assert "native" not in str(tree)  # no aten::fft_* on a NeuronCore
    module = planner.lower_plan(tree, problem, torch.device("cpu"))
    data, facts = backend.build_artifact(module, example_inputs(batch, n, torch.float32, torch.device("cpu")), "neuron")
    # a build host traces with cpu_backend=True for the named target; neuronx-cc's directory is passed
    [(args, kwargs)] = calls
    assert args == ["--auto-cast", "none", "--target", "trn1"] and facts == {"dynamic_batch": False}
    assert kwargs["cpu_backend"] is True and kwargs["compiler_workdir"]
    cache = PlanCache(tmp_path / "c")
    stored = cache.add_artifact("artifact:test:neuron", data)
    import hashlib

    loaded = cache.get_artifact("artifact:test:neuron", hashlib.sha256(stored).hexdigest())
    runner = backend.load_artifact(loaded, "neuron", torch.device("cpu"))
    x = random_complex((batch, n))
    xt = torch.from_numpy(x).to(torch.complex64)
    yr, yi = runner(xt.real, xt.imag)
    assert rel_l2(torch.complex(yr, yi), reference(x, False)) <= BAR["fp32"]


def test_neuron_fingerprint_names_the_compiler_versions():
    fp = fingerprint("neuron")
    assert fp["device"] == "neuron" and fp["neuronx-cc"] == "absent" and fp["torch-neuronx"] == "absent"
    assert fp["torch-xla"] == "absent" and fp["libneuronxla"] == "absent"
    assert fp["neuron_compiler_args"].startswith("--auto-cast none")
