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

from trnplan.core.accuracy import DEFAULT_TOL
from trnplan.tools.audit import allowlist

ROOT = pathlib.Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import neuron_device_standin as s
    s.install(); s.register_compile_backend()
    import os
    import numpy as np, torch, trnplan
    from trnplan.backends import accel

    g = np.random.default_rng(0)
    out = {"torchneuron": accel.torchneuron_present(), "neff_at_import": os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR")}

    def dev(a):
        return s.to_neuron(torch.from_numpy(np.ascontiguousarray(a)))

    def err(y, ref):
        y = (torch.complex(s.to_cpu(y[0]), s.to_cpu(y[1])) if isinstance(y, tuple) else s.to_cpu(y))
        y = y.numpy().astype(np.complex128)
        return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))

    def case(name, make, x_np, ref):
        s.OPS.clear(); graphs = len(s.GRAPHS)
        plan = make()
        x = dev(x_np) if not np.iscomplexobj(x_np) else (dev(x_np.real), dev(x_np.imag))
        y = plan.execute_split(x)
        ys = y if isinstance(y, tuple) else (y,)
        out[name] = {"devices": [str(t.device) for t in ys], "types": [type(t).__name__ for t in ys],
                     "err": err(y, ref), "graphs": len(s.GRAPHS) - graphs, "mode": plan.provenance.compile_mode,
                     "graph_ops": sorted({(o, str(d)) for o, ds, g in s.OPS if g for d in ds}),
                     "dtypes": sorted({str(d) for _, ds, _ in s.OPS for d in ds})}

    c = (g.standard_normal((4, 64)) + 1j * g.standard_normal((4, 64))).astype(np.complex64)
    r = g.standard_normal((6, 100)).astype(np.float32)
    h = np.fft.rfft(g.standard_normal((4, 64))).astype(np.complex64)
    c2 = (g.standard_normal((3, 16, 32)) + 1j * g.standard_normal((3, 16, 32))).astype(np.complex64)
    r3 = g.standard_normal((2, 4, 8, 6)).astype(np.float32)
    plan = lambda *a, **k: trnplan.plan_many(*a, device="neuron", cache=None, **k)
    case("c2c", lambda: plan(64, 4), c, np.fft.fft(c.astype(np.complex128)))
    case("r2c", lambda: plan(100, 6, kind="r2c"), r, np.fft.rfft(r.astype(np.float64)))
    case("c2r", lambda: plan(64, 4, kind="c2r"), h, np.fft.irfft(h.astype(np.complex128), n=64))
    case("c2c-2d", lambda: plan((16, 32), 3), c2, np.fft.fft2(c2.astype(np.complex128)))
    case("r2c-3d", lambda: plan((4, 8, 6), 2, kind="r2c"), r3, np.fft.rfftn(r3.astype(np.float64), axes=(1, 2, 3)))

    # complex in or out on the device: refused, naming execute_split, before any op runs
    refusals = {}
    z = s.NeuronTensor(torch.from_numpy(c))  # a complex tensor that reached the device (made without an op)
    rd = dev(r)
    for name, fn in [("c2c execute", lambda: plan(64, 4).execute(z)),
                     ("r2c execute", lambda: plan(100, 6, kind="r2c").execute(rd)),
                     ("trnplan.fft.fft", lambda: trnplan.fft.fft(z)),
                     ("trnplan.fft.rfft", lambda: trnplan.fft.rfft(rd))]:
        s.OPS.clear()
        try:
            fn()
            refusals[name] = None
        except Exception as exc:
            refusals[name] = {"cls": type(exc).__name__, "msg": str(exc),
                              "dtypes": sorted({str(d) for _, ds, _ in s.OPS for d in ds})}
    out["refusals"] = refusals

    # float64 on the device (TorchNeuron would have pre-cast it): trnplan refuses before any op
    x64 = s.NeuronTensor(torch.from_numpy(g.standard_normal((4, 64))))
    s.OPS.clear()
    try:
        trnplan.fft.rfft(x64)
        out["fp64"] = None
    except Exception as exc:
        out["fp64"] = {"cls": type(exc).__name__, "msg": str(exc), "ops": len(s.OPS)}

    # autograd through the split form: the gradient of sum(yr^2 + yi^2) is 2 n (re, im)
    re, im = (dev(c.real).requires_grad_(True), dev(c.imag).requires_grad_(True))
    s.OPS.clear()
    yr, yi = plan(64, 4).execute_split((re, im))
    (yr.square() + yi.square()).sum().backward()
    out["grad"] = {"devices": [str(re.grad.device), str(im.grad.device)], "type": type(re.grad).__name__,
                   "err": err((re.grad, im.grad), 2 * 64 * c.astype(np.complex128)),
                   "dtypes": sorted({str(d) for _, ds, _ in s.OPS for d in ds})}
    # the stand-in's own refusals, so that the checks above can fail: complex in a compiled graph
    # (NCC_EVRF004), complex, float64 and int64 in eager ops, an op off the Neuron lists in a graph
    refused = []
    for name, fn in [("complex in graph", torch.compile(lambda t: (t.to(torch.complex64) * 2).real, backend="neuron",
                                                        fullgraph=True)),
                     ("complex eager", lambda t: t.to(torch.complex64)),
                     ("float64", lambda t: t.to(torch.float64)),
                     ("int64", lambda t: t.to(torch.int64)),
                     ("off-list op in graph", torch.compile(lambda t: torch.cumsum(t, 0), backend="neuron",
                                                            fullgraph=True))]:
        try:
            fn(s.to_neuron(torch.ones(4)))
            refused.append([name, False])
        except Exception as exc:
            refused.append([name, "NCC_EVRF004" in str(exc) or "not on the documented Neuron op lists" in str(exc)])
    out["refused"] = refused

    # no silent fallback: trnplan set TorchNeuron's settings, explain() reports the fallback ops, an
    # eager op off the Neuron lists now raises, and a failed compile is a CompileError naming the log
    import os
    text = plan(64, 4).explain(full=True)
    out["fallback"] = {"env": [os.environ.get(v) for v in accel.NO_FALLBACK],
                       "line": next((l for l in text.splitlines() if l.strip().startswith("fallback")), None)}
    try:
        torch.cumsum(s.to_neuron(torch.ones(4)), 0)
        out["fallback"]["eager"] = None
    except Exception as exc:
        out["fallback"]["eager"] = str(exc)
    # item 4: the NEFF cache follows the plan cache (set at the first Neuron plan, not at import); a
    # second plan cache in the process is refused; under wisdom_only a graph missing from the NEFF
    # cache (a compile) is a WisdomMiss, and the same plan with the NEFF cached is not
    import glob, shutil, tempfile
    from trnplan.backends import accel as _accel
    from trnplan.cache import PlanCache, default_cache
    caches = {"neff": os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR"), "plan": str(default_cache().path),
              "set_at_import": out["neff_at_import"]}
    try:
        trnplan.plan_many(72, 4, device="neuron", cache=PlanCache(tempfile.mkdtemp()))
        caches["other"] = None
    except Exception as exc:
        caches["other"] = {"cls": type(exc).__name__, "msg": str(exc)}
    trnplan.plan_many(80, 4, device="neuron")  # into the default plan cache and its NEFF cache
    trnplan.clear_plan_cache(); _accel.clear_runners(); torch._dynamo.reset()
    warm = trnplan.plan_many(80, 4, device="neuron", effort="wisdom_only")
    caches["warm"] = warm.provenance.origin
    for f in glob.glob(os.path.join(caches["neff"], "*.neff")):
        os.remove(f)
    trnplan.clear_plan_cache(); _accel.clear_runners(); torch._dynamo.reset()
    try:
        trnplan.plan_many(80, 4, device="neuron", effort="wisdom_only")
        caches["cold"] = None
    except Exception as exc:
        caches["cold"] = {"cls": type(exc).__name__, "msg": str(exc)}
    out["caches"] = caches
    os.environ["STANDIN_NEURONX_CC_FAILS"] = "1"
    try:
        plan(48, 4)
        out["compile_error"] = None
    except Exception as exc:
        out["compile_error"] = {"cls": type(exc).__name__, "msg": str(exc)}
    print(json.dumps(out))
""")


#: the tests of the module-scoped `child` fixture, on one pytest-xdist worker (`make test` runs
#: --dist loadgroup): split over two workers, each ran the fixture, paying its cost twice
ONE_WORKER = pytest.mark.xdist_group("device_standin_child")


@pytest.fixture(scope="module")
def child(tmp_path_factory):
    # module scope runs before conftest's per-test cache directory: give the child its own
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in [str(ROOT), os.environ.get("PYTHONPATH")] if p),
           "TRNPLAN_CACHE_DIR": str(tmp_path_factory.mktemp("trnplan-cache"))}
    run = subprocess.run([sys.executable, "-c", CHILD, str(ROOT / "tests")], capture_output=True, text=True,
                         env=env, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


CASES = ["c2c", "r2c", "c2r", "c2c-2d", "r2c-3d"]
REAL_DTYPES = {"torch.float32", "torch.bfloat16", "torch.int32", "torch.bool"}


@ONE_WORKER
@pytest.mark.parametrize("name", CASES)
def test_execute_split_returns_neuron_tensors_with_fp32_accuracy(child, name):
    got = child[name]
    assert child["torchneuron"] is True
    assert set(got["devices"]) == {"neuron:0"} and set(got["types"]) == {"NeuronTensor"}, got
    assert got["err"] <= DEFAULT_TOL["fp32"], got


@ONE_WORKER
@pytest.mark.parametrize("name", CASES)
def test_compiled_graphs_run_only_allowlisted_real_ops(child, name):
    got = child[name]
    assert got["mode"] == "dynamo" and got["graphs"] >= 1, "the plan was not compiled with backend='neuron'"
    ops = {op for op, _ in got["graph_ops"]}
    assert ops and ops <= set(allowlist()), sorted(ops - set(allowlist()))
    assert not any("fft" in op for op in ops), ops
    assert set(got["dtypes"]) <= REAL_DTYPES, got["dtypes"]  # every op on the device, in the graph or not


@ONE_WORKER
@pytest.mark.parametrize("name", ["c2c execute", "r2c execute", "trnplan.fft.fft", "trnplan.fft.rfft"])
def test_complex_in_or_out_on_the_device_is_refused_naming_execute_split(child, name):
    got = child["refusals"][name]
    assert got is not None and got["cls"] == "ComplexOnDevice", got
    assert "plan.execute_split(" in got["msg"] and "NCC_EVRF004" in got["msg"], got["msg"]
    # nothing complex ran on the device (the plan's own real constants may have moved there)
    assert set(got["dtypes"]) <= REAL_DTYPES, got["dtypes"]


@ONE_WORKER
def test_float64_on_the_device_is_refused_with_the_fix(child):
    got = child["fp64"]
    assert got is not None and got["cls"] == "PlanningError", got
    assert "precision='fp64'" in got["msg"] and "no device path on 'neuron'" in got["msg"], got["msg"]
    assert "x.to(torch.complex64)" in got["msg"] and "x.cpu()" in got["msg"], got["msg"]
    assert got["ops"] == 0, "trnplan ran ops on the device before refusing"


@ONE_WORKER
def test_the_stand_in_refuses_what_a_neuroncore_refuses(child):
    assert child["refused"] == [["complex in graph", True], ["complex eager", True], ["float64", True],
                                ["int64", True], ["off-list op in graph", True]]


@ONE_WORKER
def test_autograd_through_execute_split_stays_real_on_the_device(child):
    got = child["grad"]
    assert set(got["devices"]) == {"neuron:0"} and got["type"] == "NeuronTensor"
    assert got["err"] <= DEFAULT_TOL["fp32"], got
    assert set(got["dtypes"]) <= REAL_DTYPES, got["dtypes"]


@ONE_WORKER
def test_no_silent_fallback_on_torchneuron(child):
    """Item 8: trnplan sets (setdefault) TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1 and
    TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1, explain() lists get_fallback_ops(), and an
    eager op with no Neuron implementation then raises instead of running on the CPU."""
    got = child["fallback"]
    assert got["env"] == ["1", "1"]
    assert got["line"] is not None and "none (torch_neuronx.get_fallback_ops(), this process" in got["line"], got
    assert got["eager"] is not None and "CPU fallback is disabled" in got["eager"], got


@ONE_WORKER
def test_a_failed_compile_is_a_compile_error_naming_the_log(child):
    got = child["compile_error"]
    assert got is not None and got["cls"] == "CompileError", got
    assert "NCC_ISTP902" in got["msg"] and "neuronx-cc's logs are under TORCH_NEURONX_NEFF_CACHE_DIR=" in got["msg"]
    assert "compile='eager'" in got["msg"]


@ONE_WORKER
def test_the_neff_cache_follows_the_plan_cache_and_wisdom_only_never_compiles(child):
    """Item 4: not set at import; set at the first Neuron plan to <plan cache>/neff; another plan cache
    in the same process is refused (the runtime reads the variable once); under wisdom_only a plan whose
    graph is missing from the NEFF cache is a WisdomMiss, with the NEFF cached it is a wisdom hit."""
    got = child["caches"]
    assert got["set_at_import"] is None
    assert got["neff"] == os.path.join(got["plan"], "neff")
    assert got["other"] is not None and got["other"]["cls"] == "PlanningError", got
    assert "Use one plan cache per process on Neuron" in got["other"]["msg"]
    assert got["warm"] == "wisdom hit"
    assert got["cold"] is not None and got["cold"]["cls"] == "WisdomMiss", got
    assert "never compiles" in got["cold"]["msg"] and "neuronx-cc compiled it now" in got["cold"]["msg"]
