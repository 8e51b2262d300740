"""The first thing to run on a Trainium instance (trn1/inf2 with torch-neuronx 2.9, or trn2).

    python bench/trainium_first_run.py 2>&1 | tee first-run.txt

It prints the versions and the runtime trnplan found (trnplan/backends/neuron_runtime.py), then
runs each step in a process of its own, so that one step's crash, hang or Neuron runtime state
cannot hide another's:

1. ``compile``  trace/compile one small plan (n=256, batch 4, dft-gemm) into a fresh plan cache
                and check it against numpy.fft in complex128, at the plan's own bar (plan.tol).
2. ``warm``     a fresh process with ``TRNPLAN_WISDOM_ONLY=1`` plans the same problem from that
                cache: a wisdom hit, the stored artifact loaded, zero compiles (the cache's own
                compile counter), the same check.
3. ``threads``  one plan with ``cores=2``, executed from two threads at once, each result checked.
4. ``plans``    n=256 (batches 7 and 3, dft-gemm), n=4096 four-step and n=4097 Bluestein, each
                with ``cores=2`` and checked.
5. ``timing``   the plans of step 4 on the device against the same transforms with
                ``device="cpu"`` (the planner's host pick): median ms per call, after a warm-up
                (a NeuronCore runs ~2.2x slower for a few seconds after the runtime starts,
                trnplan.backends.neuron.STARTUP_WARMUP_S). A table; no pass/fail on speed.

It exits 0 only if every step passed, and otherwise says what to send back. Device strategies
are forced: at these sizes the cost model would often pick the host fallback, which would test
nothing on the device. ``--cache-dir`` keeps the plan cache (default: a new temporary directory,
kept, since neuronx-cc's logs are under its ``compile/``).

On a machine without a NeuronCore it fails at step 1 with the reason; tests/test_neuron.py runs
it on the CPU against the torch_neuronx stand-in (which tests the script and trnplan's
integration, not the compiler).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import numpy as np
import torch

import trnplan
from trnplan.backends import neuron, neuron_runtime
from trnplan.cache import PlanCache

STEPS = ("compile", "warm", "threads", "plans", "timing")
#: (n, batch, forced strategy) of steps 4 and 5, all with cores=2
PLANS = ((256, 7, "dft-gemm"), (256, 3, "dft-gemm"), (4096, 4, "four-step"), (4097, 2, "bluestein"))
RESULT = "FIRST-RUN-RESULT "


def _reference(x: np.ndarray) -> np.ndarray:
    return np.fft.fft(x.astype(np.complex128), axis=-1)


def _check(plan, batch: int, n: int, seed: int) -> dict:
    """Run ``plan`` on a seeded input; its relative L2 error against numpy.fft in complex128."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))).astype(np.complex64)
    y = plan.execute(torch.from_numpy(x)).numpy()
    ref = _reference(x)
    err = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
    return {"n": n, "batch": batch, "error": err, "tol": plan.tol, "ok": bool(err <= plan.tol),
            "compile_mode": plan.provenance.compile_mode, "runs_on": plan.provenance.runs_on,
            "artifact": plan.provenance.artifact}


def _on_device(plan) -> bool:
    # the plan must run compiled for the device, not eagerly on the host
    return plan.provenance.compile_mode != "eager"


def step_compile(cache_dir: str) -> dict:
    plan = trnplan.plan_many((256,), batch=4, device="neuron", strategy="dft-gemm", cache=PlanCache(cache_dir))
    print(plan.explain(full=True))
    got = _check(plan, 4, 256, seed=1)
    got["ok"] = got["ok"] and _on_device(plan)
    got["compile_s"] = plan.provenance.compile_s
    return got


def step_warm(cache_dir: str) -> dict:
    cache = PlanCache(cache_dir)
    before = cache.stats()["compiles"]
    plan = trnplan.plan_many((256,), batch=4, device="neuron", strategy="dft-gemm", cache=cache)
    print(plan.explain(full=True))
    got = _check(plan, 4, 256, seed=2)
    got["compiles"] = cache.stats()["compiles"] - before
    got["origin"] = plan.provenance.origin
    got["ok"] = (got["ok"] and _on_device(plan) and got["compiles"] == 0 and plan.provenance.origin == "wisdom hit"
                 and plan.provenance.artifact == "artifact hit")
    return got


def step_threads(cache_dir: str) -> dict:
    plan = trnplan.plan_many((256,), batch=8, device="neuron", cores=2, strategy="dft-gemm", cache=PlanCache(cache_dir))
    print(plan.explain(full=True))
    results, errors = [], []

    def work(seed):
        try:
            for k in range(5):
                results.append(_check(plan, 8, 256, seed=100 * seed + k))
        except Exception:  # noqa: BLE001 - reported as the step's failure
            errors.append(traceback.format_exc())

    threads = [threading.Thread(target=work, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    worst = max((r["error"] for r in results), default=float("nan"))
    return {"ok": not errors and len(results) == 10 and all(r["ok"] for r in results) and _on_device(plan),
            "calls": len(results), "worst_error": worst, "tol": plan.tol, "errors": errors,
            "runs_on": plan.provenance.runs_on}


def step_plans(cache_dir: str) -> dict:
    rows = []
    for n, batch, strategy in PLANS:
        plan = trnplan.plan_many((n,), batch=batch, device="neuron", cores=2, strategy=strategy,
                                 cache=PlanCache(cache_dir))
        # explain()'s first line without the rest: its traffic line captures the graph with Dynamo
        # (~1 s a plan on a CPU), which steps 1-3 print in full already
        print(f"trnplan plan — {plan.problem.describe()} |", plan.tree)
        row = _check(plan, batch, n, seed=n + batch)
        row.update(strategy=strategy, ok=row["ok"] and _on_device(plan), compile_s=plan.provenance.compile_s)
        rows.append(row)
    return {"ok": all(r["ok"] for r in rows), "rows": rows}


def _median_ms(plan, x, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        plan.execute(x)
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def step_timing(cache_dir: str, warmup_s: float, repeats: int) -> dict:
    rows = []
    for i, (n, batch, strategy) in enumerate(PLANS):
        device = trnplan.plan_many((n,), batch=batch, device="neuron", cores=2, strategy=strategy,
                                   cache=PlanCache(cache_dir))
        host = trnplan.plan_many((n,), batch=batch, device="cpu", cache=None)
        x = torch.randn(batch, n, dtype=torch.complex64)
        end = time.perf_counter() + (warmup_s if i == 0 else 0.0)
        device.execute(x)
        while time.perf_counter() < end:
            device.execute(x)
        host.execute(x)
        rows.append({"n": n, "batch": batch, "strategy": strategy, "device_ms": _median_ms(device, x, repeats),
                     "host_ms": _median_ms(host, x, repeats), "host_tree": str(host.tree)})
    print(f"{'n':>6} {'batch':>5}  {'device plan (cores=2)':<22} {'device ms':>10} {'host ms':>10} {'host/device':>11}"
          f"  host plan")
    for r in rows:
        print(f"{r['n']:>6} {r['batch']:>5}  {r['strategy']:<22} {r['device_ms']:>10.3f} {r['host_ms']:>10.3f} "
              f"{r['host_ms'] / r['device_ms']:>11.2f}  {r['host_tree']}")
    return {"ok": True, "rows": rows}


def run_step(name: str, args) -> int:
    """One step, in this process: prints its output and one RESULT line (JSON); 0 if it passed."""
    try:
        if name == "timing":
            result = step_timing(args.cache_dir, args.warmup_s, args.repeats)
        else:
            result = {"compile": step_compile, "warm": step_warm, "threads": step_threads,
                      "plans": step_plans}[name](args.cache_dir)
    except Exception as exc:  # noqa: BLE001 - every failure is the step's result
        traceback.print_exc()
        result = {"ok": False, "exception": f"{type(exc).__name__}: {exc}"[:2000]}
    print(RESULT + json.dumps(result, default=str), flush=True)
    return 0 if result["ok"] else 1


def header() -> neuron_runtime.NeuronRuntime:
    rt = neuron_runtime.detect()
    print(f"trnplan {trnplan.__version__}, torch {torch.__version__}, Python {platform.python_version()}, "
          f"{platform.machine()}, {platform.node()}")
    print(f"instance family: {rt.family or 'unknown'}; Neuron device files: {rt.chips}; "
          f"NEURON_RT_VISIBLE_CORES={rt.visible_cores_env or '(unset)'}, "
          f"NEURON_RT_NUM_CORES={rt.num_cores_env or '(unset)'}, "
          f"NEURON_LOGICAL_NC_CONFIG={rt.logical_nc_config or '(unset)'}")
    for key, value in rt.versions().items():
        print(f"  {key:<26} {value}")
    print(f"runtime: {rt.kind or 'NONE'} — {rt.reason}")
    if "standin" in (rt.torch_neuronx or ""):
        print("*** torch_neuronx is trnplan's TEST STAND-IN: nothing below runs on a NeuronCore or compiles a NEFF; "
              "the \"device\" is this CPU ***")
    try:
        cores = rt.visible_cores()
    except ValueError as exc:
        cores = f"? ({exc})"
    print(f"visible NeuronCores: {cores if cores is not None else 'unknown (instance family not known)'}; "
          f"target {neuron.target() or 'neuronx-cc default'}; compiler args {' '.join(neuron.compiler_args())}")
    return rt


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", help="plan cache to build and use (default: a new temporary directory)")
    parser.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)  # a child process: run one step
    parser.add_argument("--warmup-s", type=float, default=neuron.STARTUP_WARMUP_S,
                        help="seconds the first timed device plan runs before timing (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per plan (median; default %(default)s)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per step (default %(default)s)")
    args = parser.parse_args(argv)
    if args.step:
        return run_step(args.step, args)
    rt = header()
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="trnplan-first-run-")
    print(f"plan cache: {cache_dir}\n")
    results = {}
    for name in STEPS:
        env = {**os.environ, **({"TRNPLAN_WISDOM_ONLY": "1"} if name == "warm" else {})}
        cmd = [sys.executable, os.path.abspath(__file__), "--step", name, "--cache-dir", cache_dir,
               "--warmup-s", str(args.warmup_s), "--repeats", str(args.repeats)]
        print(f"===== step {name} (own process{', TRNPLAN_WISDOM_ONLY=1' if name == 'warm' else ''})", flush=True)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout, check=False)
            out, code = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as exc:
            out, code = f"{exc.stdout or ''}{exc.stderr or ''}\n(timed out after {args.timeout:.0f} s)", -1
        lines = [line for line in out.splitlines() if not line.startswith(RESULT)]
        print("\n".join("    " + line for line in lines))
        found = [line[len(RESULT):] for line in out.splitlines() if line.startswith(RESULT)]
        result = json.loads(found[-1]) if found else {"ok": False, "exception": f"no result (exit status {code})"}
        result["seconds"] = time.perf_counter() - t0
        results[name] = result
        print(f"----- step {name}: {'PASS' if result['ok'] and code == 0 else 'FAIL'} ({result['seconds']:.1f} s)"
              + (f": {result['exception']}" if "exception" in result else ""), flush=True)
        if name == "compile" and not result["ok"]:
            print("      (the later steps need the compiled plan: skipped)")
            break
    failed = [name for name in STEPS if not results.get(name, {}).get("ok")]
    print("\n===== summary")
    for name in STEPS:
        r = results.get(name)
        print(f"  {name:<8} {'skipped' if r is None else 'PASS' if r['ok'] else 'FAIL'}")
    if failed or rt.kind is None:
        print(f"\nFAILED: {', '.join(failed) or 'no Neuron runtime'}. Please send back this whole output "
              f"(python bench/trainium_first_run.py 2>&1 | tee first-run.txt), the neuronx-cc logs under "
              f"{os.path.join(cache_dir, 'compile')}, and the output of `neuron-ls` and `pip list | grep -i neuron`.")
        return 1
    print("\nALL PASSED. Please send back this output (the versions and the timing table are what we need).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
