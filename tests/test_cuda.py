"""CUDA: the same plans on the GPU, against numpy.fft in complex128.

Skipped where torch sees no GPU (CI, the development machine). bench/gpu_check.sh runs this
module on a GPU machine, with the GPU benchmark; its results are in docs/gpu.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from support import BAR, DTYPES, random_complex, reference, rel_l2

import trnplan
from trnplan.cache import PlanCache

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

#: every solver, forced at the root, on sizes it applies to (the children are the planner's)
FORCED = [
    ("native", [64, 97, 4096]),
    ("dft-gemm", [16, 100, 1024]),
    ("stockham", [2, 64, 4096]),
    ("butterfly", [8, 1024]),
    ("four-step", [12, 4096, 65536]),
    ("bluestein", [97, 4097]),
]


@pytest.mark.parametrize("precision", ["fp32", "fp64"])
@pytest.mark.parametrize("solver,sizes", FORCED, ids=[s for s, _ in FORCED])
def test_forced_solvers_on_cuda(solver, sizes, precision):
    for n in sizes:
        plan = trnplan.plan_many(n, batch=4, device="cuda", dtype=DTYPES[precision], strategy=solver,
                                 compile="eager", tol=BAR[precision])
        x = random_complex((4, n), seed=n)
        y = plan.execute(torch.from_numpy(x).to(DTYPES[precision]).cuda())
        assert y.device.type == "cuda"
        err = rel_l2(y, reference(x, False))
        assert err <= BAR[precision], (solver, n, str(plan.tree), err)


def test_fp32_gemm_plan_ignores_the_users_tf32_setting():
    """With TF32 on for the whole process (PyTorch's advice for training), an fp32 GEMM tree still
    multiplies in full fp32 (it would measure ~1e-3 at TF32), and the user's setting is back after;
    a tf32 plan in the same process computes at TF32 accuracy."""
    tree = "(four-step 4096=64x64 (dft-gemm) (dft-gemm))"
    saved = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # TF32 for fp32 matmuls, the API every torch 2.x has
    try:
        x = random_complex((8, 4096), seed=3)
        xt = torch.from_numpy(x).to(torch.complex64).cuda()
        plan = trnplan.plan_many(4096, batch=8, device="cuda", strategy=tree, compile="eager", cache=None, tol=1e-6)
        err = rel_l2(plan.execute(xt), reference(x, False))
        assert err <= 1e-6, err
        assert torch.get_float32_matmul_precision() == "high"
        tf32 = trnplan.plan_many(4096, batch=8, device="cuda", precision="tf32", strategy=tree, cache=None)
        tf32_err = rel_l2(tf32.execute(xt), reference(x, False))
        print(f"\n[tf32 held] fp32 plan {err:.1e}, tf32 plan {tf32_err:.1e}")
        assert 1e-5 < tf32_err <= 2e-3, tf32_err  # TF32's 10-bit significand, really used
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(saved)


@pytest.mark.parametrize("precision", ["fp32", "fp64"])
@pytest.mark.parametrize("tree", [
    "(four-step 4096=64x64 (dft-gemm) (dft-gemm))",
    "(four-step 65536=256x256 (four-step 256=16x16 (dft-gemm) (dft-gemm)) (four-step 256=16x16 (dft-gemm) (dft-gemm)))",
    "(stockham 1024=8x8x4x4)",
])
def test_gemm_only_trees_on_cuda(tree, precision):
    """The Monarch-style trees a matrix engine runs: every level a batched GEMM."""
    n = int(tree.split()[1].split("=")[0])
    # tol = the bar this test asserts: a forced GEMM tree may be predicted above the planner's
    # default bound (fp32 5e-7) yet within the engine's 1e-6 bar
    plan = trnplan.plan_many(n, batch=8, device="cuda", dtype=DTYPES[precision], strategy=tree, compile="eager",
                             tol=BAR[precision])
    x = random_complex((8, n), seed=1)
    for inverse in (False, True):
        p = plan if not inverse else trnplan.plan_many(n, batch=8, device="cuda", dtype=DTYPES[precision],
                                                       strategy=tree, compile="eager", inverse=True,
                                                       tol=BAR[precision])
        err = rel_l2(p.execute(torch.from_numpy(x).to(DTYPES[precision]).cuda()), reference(x, inverse))
        assert err <= p.tree.error <= BAR[precision], (tree, inverse, err, p.tree.error)


@pytest.mark.parametrize("kind", ["r2c", "c2r"])
@pytest.mark.parametrize("shape,strategy", [((1000,), None), ((64,), "(real method=half (dft-gemm))"),
                                            ((32, 48), "(nd method=rowcol)"), ((8, 16, 20), None)])
def test_real_and_nd_on_cuda(kind, shape, strategy):
    plan = trnplan.plan_many(shape, batch=3, kind=kind, device="cuda", strategy=strategy, compile="eager")
    rng = np.random.default_rng(2)
    axes = tuple(range(1, len(shape) + 1))
    if kind == "r2c":
        x = rng.standard_normal((3, *shape))
        ref = np.fft.rfftn(x, axes=axes)
        xt = torch.from_numpy(x).float().cuda()
    else:
        ins = (3, *shape[:-1], shape[-1] // 2 + 1)
        x = rng.standard_normal(ins) + 1j * rng.standard_normal(ins)
        ref = np.fft.irfftn(x, s=shape, axes=axes)
        xt = torch.from_numpy(x).to(torch.complex64).cuda()
    assert rel_l2(plan.execute(xt), ref) <= BAR["fp32"], str(plan.tree)


def test_gradcheck_on_cuda():
    plan = trnplan.plan_many((6, 10), batch=2, kind="r2c", device="cuda", dtype=torch.float64,
                             strategy="(nd method=rowcol)", compile="eager")
    x = torch.randn(2, 6, 10, dtype=torch.float64, device="cuda", requires_grad=True)
    assert torch.autograd.gradcheck(plan.execute, (x,))


def test_cuda_fingerprint_names_the_gpu():
    from trnplan.cache.fingerprint import fingerprint

    fp = fingerprint("cuda")
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    assert fp["gpu"] == props.name and fp["capability"] == f"{props.major}.{props.minor}"
    assert fp["cuda"] == torch.version.cuda
    assert fp["driver"] != "unknown", fp  # the driver release (or libcuda's driver API version)


@pytest.mark.slow
def test_aot_artifact_on_cuda_loads_in_a_fresh_process(tmp_path):
    """AOT COMPILE on the GPU (~30–60 s): process 1 compiles and stores; process 2 loads with
    effort='wisdom_only' (never compiles) and gets the same numbers."""
    code = textwrap.dedent("""
        import json, os, sys, time
        import numpy as np, torch, trnplan
        from trnplan.cache import PlanCache
        cache = PlanCache(os.environ["CACHE"])
        t0 = time.perf_counter()
        plan = trnplan.plan_many(4096, batch=16, device="cuda", compile="aot", cache=cache,
                                 strategy="(four-step 4096=64x64 (dft-gemm) (dft-gemm))", tol=1e-6,
                                 effort=os.environ["EFFORT"])
        took = time.perf_counter() - t0
        rng = np.random.default_rng(0)
        x = rng.standard_normal((16, 4096)) + 1j * rng.standard_normal((16, 4096))
        y = plan.execute(torch.from_numpy(x).to(torch.complex64).cuda()).cpu().numpy()
        err = float(np.linalg.norm(y - np.fft.fft(x)) / np.linalg.norm(np.fft.fft(x)))
        pv = plan.provenance
        print("RESULT " + json.dumps({"artifact": pv.artifact, "mode": pv.compile_mode, "took": took,
                                      "dynamic": pv.dynamic_batch, "err": err, "why": pv.compile_reason,
                                      "load_check_s": pv.load_check_s, "runner": type(plan._runner).__name__}))
    """)
    results = []
    for effort in ("estimate", "wisdom_only"):
        env = {**os.environ, "CACHE": str(tmp_path / "cache"), "EFFORT": effort,
               "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=400,
                              check=False)
        assert proc.returncode == 0, proc.stderr[-4000:]
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
        results.append(json.loads(line[len("RESULT "):]))
    first, second = results
    print(f"\n[cuda aot] compile {first['took']:.1f} s, load in a fresh process {second['took'] * 1e3:.0f} ms")
    # a new package is loaded by a child process first (CUDA's load check): on the H200's torch 2.11
    # that child died of SIGSEGV, and this process would have (docs/gpu.md)
    assert first["artifact"] == "compiled now" and first["mode"] == "aot" and first["runner"] == "AOTRunner", first
    assert first["load_check_s"] > 0, first
    # the plan cache remembers that it loaded: the production process starts no child
    assert second["artifact"] == "artifact hit" and second["runner"] == "AOTRunner", second
    assert second["load_check_s"] == 0, second
    assert first["err"] <= BAR["fp32"] and second["err"] <= BAR["fp32"]


@pytest.mark.parametrize("precision,bar", [("fp32", BAR["fp32"]), ("bf16", 4e-3), ("bf16x3", 1e-5)])
def test_inductor_compiled_gemm_tree_on_cuda(precision, bar):
    """compile='inductor' on the GPU (Triton kernels, seconds per plan): the four-step GEMM tree
    meets its mode's bar, and bf16 slices are real bf16 tensors (split_bf16(as_bf16=True)) in the graph."""
    from trnplan.backends.artifacts import InductorRunner

    plan = trnplan.plan_many(4096, batch=32, device="cuda", precision=precision, compile="inductor", cache=None,
                             strategy="(four-step 4096=64x64 (dft-gemm) (dft-gemm))")
    assert isinstance(plan._runner, InductorRunner), plan.explain(full=True)
    x = random_complex((32, 4096), seed=4)
    y = plan.execute(torch.from_numpy(x).to(torch.complex64).cuda()).cpu().numpy()
    err = rel_l2(y, reference(x, False))
    print(f"\n[cuda inductor {precision}] compiled in {plan.provenance.compile_s:.1f} s, error {err:.2e}")
    assert err <= bar


def test_precompile_manifest_for_cuda(tmp_path):
    from trnplan.tools.precompile import precompile

    cache = PlanCache(tmp_path / "c")
    results = precompile([{"shape": [256], "batch": 8, "device": "cuda", "compile": "eager"},
                          {"shape": [32, 32], "batch": 2, "kind": "r2c", "device": "cuda", "compile": "eager"}],
                         cache=cache, progress=False)
    assert all(r.ok for r in results), [r for r in results if not r.ok]
    trnplan.clear_plan_cache()
    plan = trnplan.plan_many((32, 32), batch=2, kind="r2c", device="cuda", compile="eager", cache=cache,
                             effort="wisdom_only")
    assert plan.provenance.origin == "wisdom hit"


# ---------------------------------------------------------------------- precision modes on tensor cores
def test_precision_probe_on_cuda():
    """On a GPU the bf16 modes use real bf16 tensors with an fp32 output (torch.mm out_dtype):
    the probe checks that a bf16 product reaches the fp32 accumulator exactly, and that an fp32
    matmul is fp32 (TF32 is off unless a tf32 plan scopes it on)."""
    from trnplan.backends import get_backend

    probe = get_backend("cuda").precision_probe(torch.device("cuda"))
    print(f"\n[cuda probe] {probe}")
    assert probe.bf16_products_exact is True
    assert probe.fp32_matmul == "fp32"


@pytest.mark.parametrize("precision", ["bf16", "bf16x3", "bf16x6", "tf32"])
@pytest.mark.parametrize("n,strategy", [(256, None), (4096, "(four-step 4096=64x64 (dft-gemm) (dft-gemm))"),
                                        (1024, "(stockham 1024=8x8x4x4)"), (97, "bluestein")])
def test_reduced_modes_on_cuda_within_their_prediction(precision, n, strategy):
    """Each reduced mode on tensor cores: measured error ≤ the tree's prediction ≤ the mode's bar."""
    from trnplan.core.accuracy import DEFAULT_TOL

    try:
        plan = trnplan.plan_many(n, batch=64, device="cuda", precision=precision, strategy=strategy,
                                 compile="eager")
    except trnplan.PlanningError as exc:  # the model may refuse a tree it cannot certify: say so
        pytest.skip(f"{precision} {strategy or 'planner'} n={n}: {exc}"[:300])
    x = random_complex((64, n), seed=n)
    err = rel_l2(plan.execute(torch.from_numpy(x).to(torch.complex64).cuda()), reference(x, False))
    print(f"\n[cuda {precision}] n={n} {plan.tree}: measured {err:.2e}, predicted {plan.tree.error:.2e}")
    assert err <= plan.tree.error <= DEFAULT_TOL[precision]


@pytest.mark.parametrize("tol", [1e-2, 1e-5, 1e-6])
def test_auto_on_cuda_meets_tol(tol):
    plan = trnplan.plan_many(4096, batch=256, device="cuda", precision="auto", tol=tol, compile="eager")
    x = random_complex((256, 4096), seed=9)
    err = rel_l2(plan.execute(torch.from_numpy(x).to(torch.complex64).cuda()), reference(x, False))
    print(f"\n[cuda auto tol={tol:g}] {plan.tree}: measured {err:.2e}")
    assert err <= tol
