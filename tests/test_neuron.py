"""The Trainium backend, tested on the CPU: the lowering audit, and the Neuron path with a stand-in.

THE STAND-IN TESTS OUR INTEGRATION, NOT THE COMPILER. ``torch_neuronx`` cannot be installed here
(PyPI has placeholders only), so :data:`STANDIN_SOURCE` is a test-only module of that name —
``trace`` is ``torch.jit.trace``, ``DataParallel`` a shard loop, ``neuron_cores_context`` records
the core — injected through a ``sys.meta_path`` finder, so that ``importlib.util.find_spec`` and
``import torch_neuronx`` see it exactly as they would the real one. What these tests prove: trnplan
plans for the Neuron profile, hands ``trace`` a module and the documented arguments, stores the
TorchScript bytes in the plan cache, loads them in a fresh process once per core, pads and crops
the bucketed batch, shards it across cores, picks the host fallback by its cost model, and gets
the transform right. What they cannot prove: that neuronx-cc compiles these graphs, or how they
run on a NeuronCore. The lowering audit checks the graphs against the documented operator limits;
the ``neuron``-marked test at the end runs on a trn1 with torch-neuronx installed:

    python -m pytest tests/test_neuron.py -m neuron -q -s
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch
from support import BAR, random_complex, reference, rel_l2
from test_neuron_standin import activate, child_env, write_standin

import trnplan
from trnplan.backends import get_backend, neuron
from trnplan.backends.base import clear_probe_cache
from trnplan.backends.neuron_runtime import detect
from trnplan.cache import PlanCache, fingerprint
from trnplan.core.errors import BackendUnavailable, PlanningError
from trnplan.core.problem import Problem
from trnplan.core.spec import Spec
from trnplan.planner import Planner
from trnplan.planner.library import HOST_LIBRARIES
from trnplan.planner.registry import solver_names
from trnplan.tools.audit import GRID_PRECISIONS, audit, audit_grid

HOST_LEAVES = {s.name for s in HOST_LIBRARIES} | {"native"}
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
#: the bar per precision mode for the stand-in (the CPU runs fp32 GEMMs exactly: split modes meet theirs)
MODE_BAR = {"fp32": BAR["fp32"], "bf16": 4e-3, "bf16x3": 1e-5, "bf16x6": 1e-6}

# ---------------------------------------------------------------------- the stand-in
def real_neuron_sdk() -> bool:
    """The real XLA torch-neuronx is installed (by its version: the stand-in's says "standin")."""
    rt = detect()
    return rt.kind == "xla-trace" and "standin" not in (rt.torch_neuronx or "")


@pytest.fixture
def standin_host(tmp_path_factory):
    """A device host: the stand-in package and one Neuron device file (tests/test_neuron_standin.py)."""
    return write_standin(tmp_path_factory.mktemp("standin-host"), devices=1)


@pytest.fixture
def build_host(tmp_path_factory):
    """A build host: the stand-in package and no Neuron device file."""
    return write_standin(tmp_path_factory.mktemp("build-host"), devices=0)


@contextlib.contextmanager
def _active(where, monkeypatch):
    if real_neuron_sdk():
        pytest.skip("the real torch-neuronx is installed: the stand-in would shadow it")
    clear_probe_cache()  # the probe runs through the stand-in (the CPU: exact), not the assumed one
    monkeypatch.setattr(neuron, "STARTUP_WARMUP_S", 0.0, raising=False)
    try:
        with activate(where, monkeypatch) as module:
            yield module
    finally:
        trnplan.clear_plan_cache()
        clear_probe_cache()


@pytest.fixture
def standin(standin_host, monkeypatch):
    """The stand-in active in this process on a device host with 4 visible cores."""
    with _active(standin_host, monkeypatch) as module:
        yield module


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        yield


def _complex_input(shape, seed=0):
    x = random_complex(shape, seed)
    return x, torch.from_numpy(x).to(torch.complex64)


# ---------------------------------------------------------------------- the audit: every solver passes
TEST_SIZES = (("64", {"shape": 64}), ("256", {"shape": 256}), ("1000", {"shape": 1000}),
              ("4096", {"shape": 4096}), ("4097", {"shape": 4097}), ("r2c 256", {"shape": 256, "kind": "r2c"}),
              ("nd 32x32", {"shape": (32, 32)}))
#: the kinds only some solvers plan, audited for those: DCT-II (r2r) and a truncated r2c (truncated)
KIND_SIZES = {"r2r": (("dct2 256", {"shape": 256, "kind": "dct2"}), ("dst4 64", {"shape": 64, "kind": "dst4"})),
              "truncated": (("r2c 256 modes 16", {"shape": 256, "kind": "r2c", "modes": (16,)}),
                            ("r2c 32x32 modes 4x4", {"shape": (32, 32), "kind": "r2c", "modes": (4, 4)}))}


@pytest.mark.slow
# conv plans convolutions (trnplan.conv.plan_conv), not plan_many's transforms: tests/test_conv_plan.py
@pytest.mark.parametrize("solver", [s for s in solver_names() if s != "conv"])
def test_audit_every_solver_precision_and_size_passes(solver):
    audited = host = 0
    for _solver, precision, label, outcome in audit_grid([solver], GRID_PRECISIONS,
                                                         TEST_SIZES + KIND_SIZES.get(solver, ())):
        if isinstance(outcome, str):  # the forced solver declines this problem: not a failure
            assert "not applicable" in outcome
            continue
        if precision == "fp64" or solver in HOST_LEAVES:
            assert outcome.ok and outcome.host_only, f"{solver} {precision} {label}: {outcome}"
            host += 1
            continue
        assert outcome.ok, f"{solver} {precision} {label}:\n{outcome}"
        assert outcome.host_only is None and outcome.ops
        audited += 1
    if solver in HOST_LEAVES or solver in ("multicore", "precision"):
        assert audited == 0  # host-only leaves; multicore and precision do not apply at cores=1 / fixed modes
    else:
        assert audited > 0, f"{solver}: no size was audited"


def test_audit_reports_host_library_leaves_and_fp64_as_host_only():
    report = audit(Problem.create(256, 1, device="neuron"), strategy="pyfftw")
    assert report.ok and "host" in report.host_only and "pyfftw" in report.host_only
    report = audit(Problem.create(256, 1, dtype=torch.complex128))
    assert report.ok and "fp64" in report.host_only and "FP64" in str(report)


# ---------------------------------------------------------------------- the audit: negative cases
class _Complex(torch.nn.Module):
    def forward(self, re, im):
        return torch.complex(re, im) * torch.complex(im, re)  # LINE-COMPLEX


class _FFT(torch.nn.Module):
    def forward(self, x):
        return torch.fft.fft(x).real  # LINE-FFT


class _Unfold(torch.nn.Module):
    def forward(self, x):
        return x.unfold(-1, 4, 2)  # LINE-UNFOLD


class _Float64(torch.nn.Module):
    def forward(self, x):
        return x.double() * 2  # LINE-FLOAT64


class _NonZero(torch.nn.Module):
    def forward(self, x):
        return torch.nonzero(x)  # LINE-NONZERO


def _line_of(tag: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if line.rstrip().endswith(f"# {tag}"))


@pytest.mark.parametrize("module, n_inputs, tag, op, words", [
    (_Complex(), 2, "LINE-COMPLEX", "aten::complex", "complex"),
    (_FFT(), 1, "LINE-FFT", "aten::fft_fft", "fft"),
    (_Unfold(), 1, "LINE-UNFOLD", "aten::unfold", "unfold"),
    (_Float64(), 1, "LINE-FLOAT64", "aten::to", "float64"),
    (_NonZero(), 1, "LINE-NONZERO", "aten::nonzero", "data-dependent"),
])
def test_audit_names_the_offending_op_and_its_source_line(module, n_inputs, tag, op, words):
    report = audit(module, example_inputs=tuple(torch.randn(4, 16) for _ in range(n_inputs)))
    assert not report.ok and op in report.offending_ops, str(report)
    hit = next(f for f in report.findings if f.op == op)
    assert words in hit.reason.lower()
    assert hit.location.startswith(f"{__file__}:{_line_of(tag)}:"), hit.location
    assert hit.solver is None and type(module).__name__ in hit.module
    assert op in str(report) and "FAILED" in str(report)


def test_audit_of_a_cpu_plan_names_the_solver_of_the_offending_ops():
    plan = trnplan.plan_many((64,), batch=2, strategy="native", cache=None)
    report = audit(plan)
    assert not report.ok
    assert {f.solver for f in report.findings} == {"native"}
    assert any(f.op.startswith("aten::fft") or "complex" in f.reason for f in report.findings)
    assert all("trnplan/planner/native.py" in f.location for f in report.findings)


def test_audit_of_a_problem_audits_the_device_plan_and_notes_the_host_fallback():
    report = audit(Problem.create(256, 2))
    assert report.ok and report.host_only is None and "dft-gemm" in report.tree
    assert "host fallback" in report.note and "note" in str(report)


def test_audit_module_needs_example_inputs():
    with pytest.raises(TypeError, match="example_inputs"):
        audit(_FFT())


def test_audit_command_line(capsys):
    from trnplan.tools.cli import main

    assert main(["audit", "256", "--precision", "bf16", "--strategy", "dft-gemm"]) == 0
    out = capsys.readouterr().out
    assert "OK" in out and "dft-gemm" in out
    assert main(["audit", "64", "--precision", "fp64"]) == 0
    assert "HOST ONLY" in capsys.readouterr().out


def test_allowlist_ships_as_package_data_with_sources():
    from trnplan.tools.audit import allowlist

    ops = allowlist()
    assert ops["aten::mm"] == "listed" and ops["aten::cat"].startswith("hlo:")
    assert not any("fft" in op or "unfold" in op for op in ops)


# ---------------------------------------------------------------------- availability (defect 4)
def test_device_neuron_without_torch_neuronx_says_how_to_get_it():
    if detect().kind is not None:
        pytest.skip("a Neuron runtime is installed here")
    with pytest.raises(BackendUnavailable) as info:
        trnplan.plan_many((256,), batch=4, device="neuron")
    msg = str(info.value)
    assert "torch-neuronx is not installed" in msg and "device='cpu'" in msg
    # both runtimes, each with how to install it
    assert "TorchNeuron (trn2/trn3)" in msg and "torch-neuronx==2.14" in msg
    assert "PyTorch 2.9 virtual environment" in msg and "torch-neuronx==2.9" in msg
    assert "pip.repos.neuron.amazonaws.com" in msg


def test_torchneuron_is_not_the_trace_route(monkeypatch):
    """TorchNeuron's torch-neuronx 2.14 has no trace: the trace backend says so (it used to pass)."""
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda d: "2.14.3.0" if d == "torch-neuronx" else real(d))
    monkeypatch.setattr(torch._C, "_get_privateuse1_backend_name", lambda: "neuron")
    # device="neuron" then goes to the accelerator backend (get_backend); the trace backend itself refuses
    reason = neuron.NeuronBackend().unavailable_reason()
    assert reason is not None and "TorchNeuron (torch-neuronx 2.14.3.0" in reason and "no torch_neuronx.trace" in reason


def test_an_importable_torch_neuronx_without_its_distribution_is_not_available(build_host, monkeypatch):
    """Availability is by version, not by import: a module named torch_neuronx (PyPI's placeholder,
    a stray directory) without the XLA torch-neuronx distribution is no Neuron SDK."""
    import shutil

    for info in os.listdir(build_host["site"]):
        if info.endswith(".dist-info"):
            shutil.rmtree(os.path.join(build_host["site"], info))
    with activate(build_host, monkeypatch):
        assert importlib.util.find_spec("torch_neuronx") is not None
        with pytest.raises(BackendUnavailable, match="torch-neuronx is not installed"):
            trnplan.plan_many((256,), batch=4, device="neuron", cache=None)


def test_fp64_on_neuron_is_refused_as_host_only(standin):
    with pytest.raises(PlanningError, match="no device path.*device='cpu'"):
        trnplan.plan_many((256,), batch=4, dtype=torch.complex128, device="neuron")


# ---------------------------------------------------------------------- fingerprint (defects 2, 5)
def test_fingerprint_names_runtime_versions_target_and_compiler_args(monkeypatch):
    monkeypatch.setenv("TRNPLAN_NEURON_TARGET", "trn2")
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
    fp = fingerprint("neuron")
    assert fp["neuron_target"] == "trn2"
    assert fp["neuron_compiler_args"] == "--auto-cast none --target trn2"
    assert {"neuronx-cc", "torch-neuronx", "torch-xla", "libneuronxla", "torch"} <= set(fp)
    # what changes the NEFF only: the runtime library's dpkg version splits a pip-only build container
    # from the run host and changes no NEFF (issue 27 item 7); explain() still shows it
    assert "neuron-runtime" not in fp
    assert fp["neuron_logical_nc_config"] == "1"
    # cpu_backend says where the graph is traced, not what NEFF the target gets: not in the fingerprint
    monkeypatch.setenv("TRNPLAN_NEURON_CPU_BACKEND", "1")
    assert fingerprint("neuron") == fp


def test_a_build_host_must_name_the_target(build_host, monkeypatch):
    monkeypatch.delenv("TRNPLAN_NEURON_TARGET", raising=False)
    monkeypatch.setattr(neuron, "target", lambda: None)  # a build host that is no Neuron instance
    with _active(build_host, monkeypatch), pytest.raises(
            ValueError, match="no Neuron device.*set TRNPLAN_NEURON_TARGET=trn1, inf2 or trn2"):
        trnplan.plan_many((64,), batch=4, device="neuron", strategy="dft-gemm", cache=None)


# ---------------------------------------------------------------------- buckets
def test_bucket_rule():
    assert [neuron.bucket_batch(b) for b in range(1, 18)] == [2, 2, 3, 4, 6, 6, 8, 8, 12, 12, 12, 12, 16, 16, 16,
                                                              16, 24]
    assert neuron.bucket_batch(1000) == 1024 and neuron.bucket_batch(700) == 768
    assert neuron.bucket_batch(10, cores=2) == 6  # per core: ⌈10/2⌉ = 5 → 6
    assert len({neuron.bucket_batch(b) for b in range(1, 1001)}) == 19
    for b in range(1, 3000):
        assert b <= neuron.bucket_batch(b) <= max(2, 3 * b / 2)  # padding is at most a third of the bucket


def test_many_batch_sizes_compile_few_artifacts_padded_and_cropped(standin, tmp_path):
    cache = PlanCache(tmp_path / "c")
    batches = range(1, 13)
    for b in batches:
        plan = trnplan.plan_many((64,), batch=b, device="neuron", strategy="dft-gemm", cache=cache)
        x64, x = _complex_input((b, 64), seed=b)
        # the stand-in's loaded model refuses any shape but the traced bucket: padding is checked
        assert rel_l2(plan.execute(x), reference(x64, False)) <= BAR["fp32"]
        assert plan.provenance.compile_mode == "neuron"
        assert f"bucket     batch {b} over 1 NeuronCore(s)" in plan.explain(full=True)
        assert "runs on    NeuronCore 0 of those this process sees" in plan.explain(full=True)
    assert len(standin.CALLS) == 1 + len({neuron.bucket_batch(b) for b in batches}) == 7  # the probe, 6 buckets
    assert all(c["compiler_args"] == neuron.compiler_args() and c["compiler_args"][:2] == ["--auto-cast", "none"]
               and not c["cpu_backend"] for c in standin.CALLS)


def test_a_device_plan_over_the_2_gb_tensor_limit_is_refused(standin):
    # 1024 × 2^20 fp32 = 4 GiB per call: DMA offsets are 32-bit (runtimes.md §5)
    with pytest.raises(PlanningError, match=r"4\.0 GiB, over the 2 GiB a NeuronCore tensor may have"):
        trnplan.plan_many((2**20,), batch=1000, device="neuron", cache=None)


# ---------------------------------------------------------------------- a warm process (defect 1)
_CHILD = textwrap.dedent(r"""
    import json, sys
    import warnings
    warnings.simplefilter("ignore")
    import numpy as np, torch, trnplan
    from trnplan.cache import PlanCache
    assert "torch_neuronx" not in sys.modules  # trnplan must import it itself
    got = []
    for job in json.loads(sys.argv[1]):
        plan = trnplan.plan_many((job["n"],), batch=job["batch"], device="neuron", cores=job["cores"],
                                 precision=job["precision"], strategy=job["strategy"], cache=PlanCache(job["cache"]))
        y = plan.execute(torch.from_numpy(np.load(job["data"])).to(torch.complex64))
        standin = sys.modules["torch_neuronx"]
        got.append({"traces": len(standin.CALLS), "placements": list(standin.PLACEMENTS),
                    "artifact": plan.provenance.artifact, "origin": plan.provenance.origin,
                    "explain": plan.explain(full=True), "y": y.numpy().view(np.float32).tolist()})
    print(json.dumps(got))
""")


def _fresh_process(where, tmp_path, x, *, n, batch, cores=1, precision="fp32", strategy="dft-gemm", **env):
    """Run the plan in a new process that sees ``where`` (a stand-in host) and only the plan cache."""
    job = {"n": n, "batch": batch, "cores": cores, "precision": precision, "strategy": strategy}
    return _fresh_process_runs(where, tmp_path, [(x, job)], **env)[0]


def _fresh_process_runs(where, tmp_path, runs, **env):
    """Each ``(x, plan arguments)`` of ``runs`` planned and executed in turn in one new process (as
    :func:`_fresh_process`; ``traces`` and ``placements`` count from the process's start)."""
    jobs = []
    for i, (x, kw) in enumerate(runs):
        np.save(tmp_path / f"x{i}.npy", x.numpy())
        jobs.append({"cores": 1, "precision": "fp32", "strategy": "dft-gemm", **kw, "cache": str(tmp_path / "c"),
                     "data": str(tmp_path / f"x{i}.npy")})
    env = child_env(where, TRNPLAN_CACHE_DIR=str(tmp_path / "default"), TRNPLAN_WISDOM_ONLY="1",
                    NEURON_RT_VISIBLE_CORES="0-3", **env)
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(jobs)], capture_output=True, text=True, env=env,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    for g, job in zip(got, jobs):
        g["y"] = np.asarray(g["y"], dtype=np.float32).view(np.complex64).reshape(job["batch"], job["n"])
    return got


def test_a_warm_process_loads_its_artifact_with_one_core(standin, standin_host, tmp_path):
    """The production path: a fresh process, a warm cache, TRNPLAN_WISDOM_ONLY=1, cores=1. It must
    import torch_neuronx before torch.jit.load ("Unknown builtin op: neuron::…" otherwise)."""
    cache = PlanCache(tmp_path / "c")
    trnplan.plan_many((256,), batch=4, device="neuron", strategy="dft-gemm", cache=cache)
    x64, x = _complex_input((4, 256), seed=2)
    got = _fresh_process(standin_host, tmp_path, x, n=256, batch=4)
    assert got["traces"] == 0 and got["artifact"] == "artifact hit" and got["origin"] == "wisdom hit"
    assert got["placements"] == [-1]  # one copy, the runtime's default core
    assert rel_l2(got["y"], reference(x64, False)) <= BAR["fp32"]


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16x3"])
def test_plan_trace_cache_fresh_process_load_sharded_execute(standin, standin_host, tmp_path, precision):
    cache = PlanCache(tmp_path / "c")
    plan = trnplan.plan_many((256,), batch=7, device="neuron", cores=2, precision=precision, strategy="dft-gemm",
                             cache=cache)
    # the probe ran through trace (the stand-in's CPU: exact products), so bf16x3 plans at its own bar
    assert "probed on a NeuronCore" in plan.provenance.probe and "products into the fp32 accumulator: exact" in (
        plan.provenance.probe)
    assert plan.provenance.artifact == "compiled now" and len(standin.CALLS) == 2  # the probe, the plan
    assert "bucket     batch 7 over 2 NeuronCore(s): 2 call(s) of the compiled batch 4" in plan.explain(full=True)
    assert "runs on    NeuronCores 0–1 of those this process sees" in plan.explain(full=True)
    x64, x = _complex_input((7, 256), seed=3)
    assert rel_l2(plan.execute(x), reference(x64, False)) <= MODE_BAR[precision]
    # a fresh process: only the plan cache carries the plan and the traced bytes
    got = _fresh_process(standin_host, tmp_path, x, n=256, batch=7, cores=2, precision=precision)
    assert got["traces"] == 0 and got["artifact"] == "artifact hit"  # loaded (the probe too), never re-traced
    assert sorted(got["placements"]) == [0, 1]  # one copy per core, each placed
    assert rel_l2(got["y"], reference(x64, False)) <= MODE_BAR[precision]


# ---------------------------------------------------------------------- a build host (defect 2)
@pytest.mark.parametrize("cpu_backend", ["", "1"], ids=["no-device", "cpu_backend"])
def test_precompile_on_a_build_host_then_run_on_the_instance(build_host, standin_host, tmp_path, monkeypatch,
                                                             cpu_backend):
    """Precompile where there is no NeuronCore (nothing is loaded there), then a fresh process on the
    instance, under TRNPLAN_WISDOM_ONLY=1, finds wisdom and NEFF: cpu_backend is not in the fingerprint."""
    monkeypatch.setenv("TRNPLAN_NEURON_TARGET", "trn1")
    monkeypatch.setenv("TRNPLAN_NEURON_CPU_BACKEND", cpu_backend)
    entries = [{"shape": 256, "batch": 4, "device": "neuron", "strategy": "dft-gemm"},
               {"shape": 256, "batch": 7, "device": "neuron", "cores": 2, "strategy": "dft-gemm"}]
    with _active(build_host, monkeypatch) as tnx:
        results = trnplan.precompile(entries, cache=str(tmp_path / "c"), progress=False)
        assert [r.error for r in results] == [None, None] and [r.compile_mode for r in results] == ["neuron"] * 2
        assert [c["cpu_backend"] for c in tnx.CALLS] == [True, True]  # no probe: nothing to run it on
        assert tnx.PLACEMENTS == []  # nothing loaded on the build host
    monkeypatch.delenv("TRNPLAN_NEURON_CPU_BACKEND")
    # both plans in one fresh process (an interpreter start each cost ~10 s of this suite): the
    # trace count is the process's, so the second plan's load is checked to trace nothing as well
    inputs = [(_complex_input((batch, n), seed=batch), {"n": n, "batch": batch, "cores": cores})
              for n, batch, cores in ((256, 4, 1), (256, 7, 2))]
    runs = _fresh_process_runs(standin_host, tmp_path, [(x, kw) for (_, x), kw in inputs], TRNPLAN_NEURON_TARGET="trn1")
    for ((x64, _), _), got in zip(inputs, runs, strict=True):
        assert got["traces"] == 0 and got["artifact"] == "artifact hit"
        assert "assumed" in got["explain"]  # the probe the build host assumed, kept with the plans
        assert rel_l2(got["y"], reference(x64, False)) <= BAR["fp32"]


def test_a_plan_on_a_build_host_is_built_and_says_it_cannot_run_here(build_host, tmp_path, monkeypatch):
    monkeypatch.setenv("TRNPLAN_NEURON_TARGET", "trn2")
    with _active(build_host, monkeypatch) as tnx:
        plan = trnplan.plan_many((64,), batch=4, device="neuron", strategy="dft-gemm",
                                 cache=PlanCache(tmp_path / "c"))
        assert [c["compiler_args"] for c in tnx.CALLS] == [["--auto-cast", "none", "--target", "trn2"]]
        assert tnx.CALLS[0]["cpu_backend"] is True and "assumed" in plan.provenance.probe
        assert "runs on    nowhere on this host: this host has no Neuron device" in plan.explain(full=True)
        with pytest.raises(BackendUnavailable, match=r"built but cannot run here.*--target trn2.*TRNPLAN_WISDOM_ONLY"):
            plan.execute(torch.zeros(4, 64, dtype=torch.complex64))


# ---------------------------------------------------------------------- core placement (defect 3)
def test_sharded_executor_matches_the_unsharded_module(standin):
    problem = Problem.create(64, 4, device="neuron")
    planner = Planner(get_backend("neuron"), exportable=True)
    tree = planner.plan(problem, Spec(name="dft-gemm"))
    module = planner.lower_plan(tree, problem, torch.device("cpu"))
    backend = get_backend("neuron")
    from trnplan.backends.artifacts import example_inputs

    data, _ = backend.build_artifact(module, example_inputs(4, 64, torch.float32, torch.device("cpu")), "neuron")
    run = neuron.NeuronExecutor(backend.load_artifact(data, "neuron", torch.device("cpu")), 4, 3, backend)
    re, im = torch.randn(11, 64), torch.randn(11, 64)  # 3 shards of 4 (the last padded), over 3 cores
    want = module(re, im)
    got = run(re, im)
    assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(got, want))
    assert sorted(standin.PLACEMENTS) == [0, 1, 2]  # the supported neuron_cores_context placed each copy


def test_plans_loading_from_two_threads_do_not_misplace_each_other(standin, tmp_path):
    """neuron_cores_context sets a process-wide default and is not thread-safe: loads are serialised."""
    import threading

    cache = PlanCache(tmp_path / "c")
    for n in (64, 128):  # compiled first, so that the threads below only load
        trnplan.plan_many((n,), batch=8, device="neuron", cores=2, strategy="dft-gemm", cache=cache)
    trnplan.clear_plan_cache()
    standin.PLACEMENTS.clear()
    barrier, errors = threading.Barrier(2), []

    def build(n):
        try:
            barrier.wait()
            trnplan.plan_many((n,), batch=8, device="neuron", cores=2, strategy="dft-gemm", cache=cache)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=build, args=(n,)) for n in (64, 128)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and standin.OVERLAPS == []
    assert sorted(standin.PLACEMENTS) == [0, 0, 1, 1]


def test_more_cores_than_this_process_sees_is_refused_before_compiling(standin, monkeypatch):
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "0-1")
    with pytest.raises(BackendUnavailable, match=r"cores=3, but this process sees 2 NeuronCore\(s\) "
                                                 r"\(NEURON_RT_VISIBLE_CORES=0-1\)\. Set NEURON_RT_VISIBLE_CORES=0-2"):
        trnplan.plan_many((256,), batch=12, device="neuron", cores=3, strategy="dft-gemm", cache=None)
    assert standin.CALLS == []


# ---------------------------------------------------------------------- failed compiles (defect 4)
def test_a_failed_compile_raises_with_the_compiler_log(standin, tmp_path, monkeypatch):
    monkeypatch.setenv("TRNPLAN_STANDIN_TRACE_FAILS", "1")
    monkeypatch.setenv("TRNPLAN_NEURON_PROBE", "0")
    cache = PlanCache(tmp_path / "c")
    with pytest.raises(trnplan.CompileError, match=r"torch_neuronx\.trace failed .*neuronx-cc failed.*compiler's "
                                                   r"working directory is kept at .*log-neuron-cc\.txt.*"
                                                   r"TRNPLAN_NEURON_HOST_FALLBACK=1") as info:
        trnplan.plan_many((256,), batch=4, device="neuron", strategy="dft-gemm", cache=cache)
    workdir = standin.CALLS[-1]["compiler_workdir"]
    assert workdir.startswith(str(tmp_path / "c")) and workdir in str(info.value)  # under the plan cache
    with open(os.path.join(workdir, "log-neuron-cc.txt")) as log:
        assert "NCC_STANDIN" in log.read()


def test_the_host_fallback_after_a_failed_compile_is_opt_in_and_said(standin, tmp_path, monkeypatch):
    monkeypatch.setenv("TRNPLAN_STANDIN_TRACE_FAILS", "1")
    monkeypatch.setenv("TRNPLAN_NEURON_PROBE", "0")
    monkeypatch.setenv("TRNPLAN_NEURON_HOST_FALLBACK", "1")
    with pytest.warns(trnplan.cache.CacheWarning, match="could not build the neuron artifact"):
        plan = trnplan.plan_many((256,), batch=4, device="neuron", strategy="dft-gemm", cache=PlanCache(tmp_path / "c"))
    assert plan.provenance.compile_mode == "eager" and "CompileError" in plan.provenance.artifact_error
    assert "runs on    the host CPU, not a NeuronCore: neuron failed to build" in plan.explain(full=True)
    assert "TRNPLAN_NEURON_HOST_FALLBACK=1" in plan.explain(full=True)
    x64, x = _complex_input((4, 256))
    assert rel_l2(plan.execute(x), reference(x64, False)) <= BAR["fp32"]


def test_a_successful_compile_keeps_only_its_logs_under_the_cache(standin, tmp_path):
    trnplan.plan_many((64,), batch=4, device="neuron", strategy="dft-gemm", cache=PlanCache(tmp_path / "c"))
    workdir = standin.CALLS[-1]["compiler_workdir"]
    assert workdir.startswith(str(tmp_path / "c" / "compile"))


# ---------------------------------------------------------------------- host fallback
def _neuron_plan(n, batch):
    return Planner(get_backend("neuron"), exportable=True).search(Problem.create(n, batch, device="neuron"))


def test_cost_model_keeps_small_problems_on_the_host_and_large_batches_on_the_device():
    small, candidates = _neuron_plan(256, 2)
    assert small.solver in HOST_LEAVES, small
    device = min((c.node for c in candidates if c.node is not None and c.solver not in HOST_LEAVES),
                 key=lambda node: node.time_us)
    assert device.time_us > 10 * small.time_us  # ~0.7 ms per dispatch against a few µs on the host
    large, _ = _neuron_plan(256, 16384)
    assert large.solver not in HOST_LEAVES, large
    # the host leaf is a root-only fallback: never a leaf inside a device graph
    assert all(node.solver not in HOST_LEAVES for _, node in large.walk())


def test_host_fallback_runs_on_the_host_without_compiling_even_the_probe(standin):
    plan = trnplan.plan_many((256,), batch=2, device="neuron", cache=None)
    assert plan.tree.solver in HOST_LEAVES and plan.provenance.compile_mode == "eager"
    assert "host fallback" in plan.explain(full=True) and plan.provenance.artifact is None
    assert "runs on    the host CPU, not a NeuronCore: host fallback: the cost model prices" in plan.explain(full=True)
    assert standin.CALLS == []  # nothing compiled: not the plan, and not the precision probe (defect 5)
    assert "assumed" in plan.provenance.probe and "host fallback runs this plan" in plan.provenance.probe
    x64, x = _complex_input((2, 256))
    assert rel_l2(plan.execute(x), reference(x64, False)) <= BAR["fp32"]


def test_auto_precision_still_probes_before_choosing(standin):
    # bf16x3/bf16x6 depend on the probe: it runs first (a trace without a workdir), whichever plan wins
    plan = trnplan.plan_many((256,), batch=2, device="neuron", precision="auto", tol=1e-3, cache=None)
    assert standin.CALLS[0]["compiler_workdir"] is None and "probed on a NeuronCore" in plan.provenance.probe


# ---------------------------------------------------------------------- measured planning (defect 5)
def test_measure_times_each_candidate_as_a_neff_on_the_neuroncores(standin, tmp_path, monkeypatch):
    monkeypatch.setenv("TRNPLAN_MEASURE_TOP_K", "3")
    # no time limit in reach: a candidate traced when the limit runs out is left untimed, and this
    # test counts traces per timed candidate (under load the 5 s default cut the third one)
    monkeypatch.setenv("TRNPLAN_TIMELIMIT", "600")
    plan = trnplan.plan_many((64,), batch=8192, device="neuron", effort="measure", cache=PlanCache(tmp_path / "c"))
    m = plan.provenance.measurement
    timed = [t for t in m.timings if t.measured_us is not None]
    device_timed = [t for t in timed if t.solver not in HOST_LEAVES]
    assert device_timed, m
    # the probe, one trace per device candidate timed; the winner's bytes are reused, not traced again
    assert len(standin.CALLS) == 1 + len(device_timed)
    assert plan.provenance.compile_mode == "neuron" or plan.tree.solver in HOST_LEAVES
    x64, x = _complex_input((8192, 64))
    assert rel_l2(plan.execute(x), reference(x64, False)) <= BAR["fp32"]


def test_measure_on_a_build_host_is_refused(build_host, monkeypatch):
    monkeypatch.setenv("TRNPLAN_NEURON_TARGET", "trn1")
    with _active(build_host, monkeypatch), pytest.raises(
            PlanningError, match=r"effort='measure' times the candidates where the plan runs, and device='neuron' has "
                                 r"no NeuronCore to time on here \(this host has no Neuron device"):
        trnplan.plan_many((64,), batch=512, device="neuron", effort="measure", cache=None)


# ---------------------------------------------------------------------- bench/trainium_first_run.py
FIRST_RUN = os.path.join(os.path.dirname(TESTS_DIR), "bench", "trainium_first_run.py")


def _first_run(where, tmp_path, **env):
    cmd = [sys.executable, FIRST_RUN, "--cache-dir", str(tmp_path / "c"), "--warmup-s", "0", "--repeats", "2"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False,
                          env=child_env(where, TRNPLAN_CACHE_DIR=str(tmp_path / "default"), **env))


@pytest.mark.slow
def test_first_run_script_passes_against_the_stand_in(standin_host, tmp_path):
    out = _first_run(standin_host, tmp_path)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    text = out.stdout
    assert "runtime: xla-trace" in text and "TEST STAND-IN" in text and "torch-xla" in text
    for step in ("compile", "warm", "threads", "plans", "timing"):
        assert f"----- step {step}: PASS" in text
    assert "TRNPLAN_WISDOM_ONLY=1" in text and "origin     wisdom hit" in text
    assert "(four-step 4096" in text and "(bluestein 4097" in text and "host/device" in text
    assert "ALL PASSED" in text


def test_first_run_script_fails_and_says_what_to_send_back(standin_host, tmp_path):
    out = _first_run(standin_host, tmp_path, TRNPLAN_STANDIN_TRACE_FAILS="1")
    assert out.returncode == 1
    text = out.stdout
    assert "----- step compile: FAIL" in text and "CompileError" in text and "log-neuron-cc.txt" in text
    assert "skipped" in text and "FAILED: compile" in text and "send back this whole output" in text
    assert os.path.join(str(tmp_path / "c"), "compile") in text


def test_first_run_script_without_a_runtime_fails(tmp_path):
    if detect().kind is not None:
        pytest.skip("a Neuron runtime is installed here")
    out = subprocess.run([sys.executable, FIRST_RUN, "--cache-dir", str(tmp_path / "c")], capture_output=True,
                         text=True, timeout=300, check=False)
    assert out.returncode == 1 and "runtime: NONE" in out.stdout and "torch-neuronx is not installed" in out.stdout


# ---------------------------------------------------------------------- real hardware
@pytest.mark.neuron
@pytest.mark.skipif(not real_neuron_sdk(), reason="needs torch-neuronx on a trn1/trn2 (docs/trainium.md)")
@pytest.mark.parametrize("n, batch, strategy, precision", [
    (256, 64, "dft-gemm", "fp32"), (4096, 16, "four-step", "fp32"), (4097, 4, "bluestein", "fp32"),
    (256, 64, "dft-gemm", "bf16"), (1000, 6, "four-step", "fp32")])
def test_on_a_neuroncore(tmp_path, n, batch, strategy, precision):
    # forced device strategies: at these sizes the cost model would otherwise pick the host fallback
    plan = trnplan.plan_many((n,), batch=batch, device="neuron", strategy=strategy, precision=precision,
                             cores=2, cache=PlanCache(tmp_path / "c"))
    assert plan.provenance.compile_mode == "neuron"
    x64, x = _complex_input((batch, n))
    err = rel_l2(plan.execute(x), reference(x64, False))
    print(plan.explain(full=True), f"\nmeasured relative L2 error {err:.2e}")
    assert err <= plan.tol


@pytest.mark.neuron
@pytest.mark.skipif(not real_neuron_sdk(), reason="needs torch-neuronx on a trn1/trn2 (docs/trainium.md)")
def test_precision_probe_on_a_neuroncore():
    clear_probe_cache()
    probe = get_backend("neuron").precision_probe()
    print(probe.describe())  # the seed project's finding, checked: are bf16 products rounded on the Tensor Engine?
    assert "probed on a NeuronCore" in probe.source and probe.fp32_matmul == "fp32"
