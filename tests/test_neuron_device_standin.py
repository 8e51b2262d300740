"""trnplan end to end on a stood-in TorchNeuron ``neuron`` device (tests/neuron_device_standin.py).

In a child process (the PrivateUse1 rename cannot be undone), real tensors report
``device.type == "neuron"``: a wrapper subclass over CPU tensors, registered with torch's Python
PrivateUse1 backend hooks, with a dynamo backend named "neuron" that runs the captured graph op by
op and refuses complex and float64 inside it (NCC_EVRF004; no FP64 on a NeuronCore). trnplan
detects TorchNeuron from the registration, plans GEMM trees, compiles each plan whole with
``torch.compile(backend="neuron")`` and runs it; these tests check values against numpy
complex128 with trnplan's fp32 bar, the device of every result and gradient, and every ATen op
the compiled graphs ran. What it cannot show: neuronx-cc's lowering, Trainium numerics, TorchNeuron's
eager fallbacks (docs/trainium.md, "What has run where").
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from trnplan.audit import allowlist
from trnplan.core.accuracy import DEFAULT_TOL

ROOT = pathlib.Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import neuron_device_standin as s
    s.install(); s.register_compile_backend()
    import numpy as np, torch, trnplan
    from trnplan.backends import accel

    g = np.random.default_rng(0)
    out = {"torchneuron": accel.torchneuron_present()}

    def err(y, ref):
        y = s.to_cpu(y).numpy().astype(np.complex128)
        return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))

    def case(name, fn, x_np, ref):
        s.OPS.clear(); graphs = len(s.GRAPHS)
        x = s.to_neuron(torch.from_numpy(x_np))
        y = fn(x)
        out[name] = {"device": str(y.device), "type": type(y).__name__, "err": err(y, ref),
                     "graph_ops": sorted({(o, str(d)) for o, ds, g in s.OPS if g for d in ds}),
                     "graphs": len(s.GRAPHS) - graphs}

    c = (g.standard_normal((4, 64)) + 1j * g.standard_normal((4, 64))).astype(np.complex64)
    r = g.standard_normal((5, 100)).astype(np.float32)  # batch 5 runs in the compiled bucket 6
    h = np.fft.rfft(g.standard_normal((4, 64))).astype(np.complex64)
    c2 = (g.standard_normal((3, 16, 32)) + 1j * g.standard_normal((3, 16, 32))).astype(np.complex64)
    case("fft", trnplan.fft.fft, c, np.fft.fft(c.astype(np.complex128)))
    case("rfft", trnplan.fft.rfft, r, np.fft.rfft(r.astype(np.float64)))
    case("irfft", lambda x: trnplan.fft.irfft(x, n=64), h, np.fft.irfft(h.astype(np.complex128), n=64))
    case("fft2", trnplan.fft.fft2, c2, np.fft.fft2(c2.astype(np.complex128)))

    # the (re, im) pair form: no complex tensor on the device at all, in the graph or around it
    plan = trnplan.plan_many(256, 4, device="neuron", cache=None)
    re, im = (g.standard_normal((4, 256)).astype(np.float32) for _ in range(2))
    s.OPS.clear()
    yr, yi = plan.execute((s.to_neuron(torch.from_numpy(re)), s.to_neuron(torch.from_numpy(im))))
    out["pair"] = {"devices": [str(yr.device), str(yi.device)], "mode": plan.provenance.compile_mode,
                   "tree": str(plan.tree), "plan_device": str(plan.device),
                   "err": err(torch.complex(s.to_cpu(yr), s.to_cpu(yi)), np.fft.fft(re + 1j * im.astype(np.float64))),
                   "dtypes": sorted({str(d) for _, ds, _ in s.OPS for d in ds})}

    # float64 on the device (TorchNeuron would have pre-cast it): trnplan refuses before any op
    x64 = s.NeuronTensor(torch.from_numpy(g.standard_normal((4, 64))))
    s.OPS.clear()
    try:
        trnplan.fft.rfft(x64)
        out["fp64"] = None
    except Exception as exc:
        out["fp64"] = {"cls": type(exc).__name__, "msg": str(exc), "ops": len(s.OPS)}

    # autograd: the gradient of sum |fft(x)|^2 is 2 n x (torch's conjugate-Wirtinger convention)
    xg = s.to_neuron(torch.from_numpy(c)).requires_grad_(True)
    y = trnplan.fft.fft(xg)
    (y.real.square() + y.imag.square()).sum().backward()
    out["grad"] = {"device": str(xg.grad.device), "type": type(xg.grad).__name__,
                   "err": err(xg.grad, 2 * 64 * c.astype(np.complex128))}
    # the stand-in's own refusals, so that the checks above can fail: complex in a compiled graph
    # (NCC_EVRF004), float64 in any op on the device
    refused = []
    for name, fn in [("complex in graph", torch.compile(lambda t: (t.to(torch.complex64) * 2).real, backend="neuron",
                                                        fullgraph=True)),
                     ("float64", lambda t: t.to(torch.float64))]:
        try:
            fn(s.to_neuron(torch.ones(4)))
        except Exception as exc:
            refused.append([name, "NCC_EVRF004" in str(exc)])
    out["refused"] = refused
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def child(tmp_path_factory):
    # module scope runs before conftest's per-test cache directory: give the child its own
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in [str(ROOT), os.environ.get("PYTHONPATH")] if p),
           "TRNPLAN_CACHE_DIR": str(tmp_path_factory.mktemp("trnplan-cache"))}
    run = subprocess.run([sys.executable, "-c", CHILD, str(ROOT / "tests")], capture_output=True, text=True,
                         env=env, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "fft2"])
def test_fft_functions_return_neuron_tensors_with_fp32_accuracy(child, name):
    got = child[name]
    assert child["torchneuron"] is True
    assert (got["device"], got["type"]) == ("neuron:0", "NeuronTensor")
    assert got["err"] <= DEFAULT_TOL["fp32"], got


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "fft2"])
def test_compiled_graphs_run_only_allowlisted_real_ops(child, name):
    got = child[name]
    assert got["graphs"] >= 1, "the plan was not compiled with backend='neuron'"
    ops = {op for op, _ in got["graph_ops"]}
    dtypes = {d for _, d in got["graph_ops"]}
    assert ops and ops <= set(allowlist()), sorted(ops - set(allowlist()))
    assert not any("fft" in op for op in ops), ops
    assert dtypes <= {"torch.float32", "torch.bfloat16", "torch.int32", "torch.bool"}, dtypes


def test_the_pair_form_keeps_every_tensor_real(child):
    got = child["pair"]
    assert got["mode"] == "dynamo" and got["plan_device"] == "neuron:0"
    assert got["devices"] == ["neuron:0", "neuron:0"]
    assert got["err"] <= DEFAULT_TOL["fp32"], got
    assert set(got["dtypes"]) <= {"torch.float32", "torch.bfloat16", "torch.int32", "torch.bool"}, got["dtypes"]


def test_float64_on_the_device_is_refused_with_the_fix(child):
    got = child["fp64"]
    assert got is not None and got["cls"] == "PlanningError", got
    assert "precision='fp64'" in got["msg"] and "no device path on 'neuron'" in got["msg"], got["msg"]
    assert "x.to(torch.complex64)" in got["msg"] and "x.cpu()" in got["msg"], got["msg"]
    assert got["ops"] == 0, "trnplan ran ops on the device before refusing"


def test_the_stand_in_refuses_complex_in_a_graph_and_float64(child):
    assert child["refused"] == [["complex in graph", True], ["float64", True]]


def test_autograd_gradient_is_on_the_device(child):
    got = child["grad"]
    assert (got["device"], got["type"]) == ("neuron:0", "NeuronTensor")
    assert got["err"] <= DEFAULT_TOL["fp32"], got
