"""First run on a trn1/inf2 with torch-neuronx 2.9 on torch-xla: the ``xla`` device, lazy XLA route.

    python bench/first_run_xla.py --cache-dir /tmp/fr 2>&1 | tee first-run-xla.txt

Nothing of this has run on Trainium yet; docs/trainium.md shows the output expected and what the
stand-in run (tests/xla/test_trn1_xla.py) printed. Steps, each a ``FIRST-RUN-RESULT`` line:

1. ``plans``     dft-gemm 256 and butterfly 1024 (batch 4) on ``xla`` by the default route (lazy XLA on
                 Neuron), ``execute_split`` against numpy complex128 at 5e-7; ``executed_fallback_ops()``
                 empty; NEFFs written under ``NEURON_COMPILE_CACHE_URL`` per plan.
2. ``openxla``   the same dft-gemm plan with ``compile="dynamo"`` (openxla, which torch-neuronx 2.9 does
                 not support): reported, not asserted.
3. ``complex``   one deliberate complex tensor at the boundary: reported (trnplan refuses it naming
                 ``execute_split``; the step passes when it is refused).
4. ``warm``      a second process, ``TRNPLAN_WISDOM_ONLY=1``, same plan cache: wisdom hits, the same
                 accuracy, zero new NEFFs.
5. ``operators`` ``neuronx-cc list-operators --framework XLA`` against the list trnplan ships
                 (``trnplan/backends/data/neuronx_cc_xla_ops.tsv``): reported (skipped without neuronx-cc).

Exit status 0 only if steps 1, 3 and 4 passed. The plan cache directory (``--cache-dir``) holds the
Neuron compile cache (``neuron-compile-cache/``, with neuronx-cc's logs of a failed compile) and is kept.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import _first_run as fr

fr.prelude()

import torch
import torch_xla
import torch_xla.debug.metrics as met

import trnplan
from trnplan.backends import accel
from trnplan.cache import PlanCache
from trnplan.core.errors import ComplexOnDevice
from trnplan.tools import xla_audit

DEV = torch_xla.device()


def _neffs() -> int:
    return fr.count_neffs(os.environ.get("NEURON_COMPILE_CACHE_URL"))


def step_plans(cache_dir: str, compile: str = "auto") -> dict:
    rows = []
    for (n, batch, strategy), seed in zip(fr.PLANS, (1, 2), strict=True):
        before, fallback = _neffs(), set(met.executed_fallback_ops())
        plan = trnplan.plan_many(n, batch, device="xla", strategy=strategy, compile=compile, cache=PlanCache(cache_dir))
        err = fr.split_error(plan, DEV, seed)
        new_fallback = sorted(set(met.executed_fallback_ops()) - fallback)
        rows.append({"plan": str(plan.tree), "route": plan.provenance.compile_mode, "error": err,
                     "compile_s": round(plan.provenance.compile_s, 2), "new_neffs": _neffs() - before,
                     "fallback_ops": new_fallback, "ok": err <= fr.BAR and not new_fallback})
        print(plan.explain(full=True))
    return {"ok": all(r["ok"] for r in rows), "rows": rows}


def step_openxla(cache_dir: str) -> dict:
    try:
        n, batch, strategy = fr.PLANS[0]
        plan = trnplan.plan_many(n, batch, device="xla", strategy=strategy, compile="dynamo", cache=PlanCache(cache_dir))
        return {"ok": True, "reported": True, "error": fr.split_error(plan, DEV, 3), "reason": plan.provenance.compile_reason}
    except Exception as exc:  # noqa: BLE001 - reported, not asserted: torch-neuronx 2.9 has no torch.compile
        return {"ok": True, "reported": True, "exception": f"{type(exc).__name__}: {str(exc)[:1500]}"}


def step_complex(cache_dir: str) -> dict:
    n, batch, strategy = fr.PLANS[0]
    plan = trnplan.plan_many(n, batch, device="xla", strategy=strategy, cache=PlanCache(cache_dir))
    try:
        plan.execute(torch.zeros(batch, n, dtype=torch.complex64).to(DEV))
        return {"ok": False, "refused": False, "note": "a complex tensor crossed the boundary on this device"}
    except ComplexOnDevice as exc:
        return {"ok": True, "refused": True, "message": str(exc)[:600]}


def step_warm(cache_dir: str) -> dict:
    before = _neffs()
    plans = [trnplan.plan_many(n, b, device="xla", strategy=s, cache=PlanCache(cache_dir)) for n, b, s in fr.PLANS]
    errors = [fr.split_error(p, DEV, seed) for p, seed in zip(plans, (1, 2), strict=True)]
    origins = [p.provenance.origin for p in plans]
    new = _neffs() - before
    return {"ok": all(e <= fr.BAR for e in errors) and new == 0 and origins == ["wisdom hit"] * len(plans),
            "errors": errors, "origins": origins, "neffs_before": before, "new_neffs": new}


def step_operators() -> dict:
    exe = shutil.which("neuronx-cc")
    if exe is None:
        return {"ok": True, "skipped": "neuronx-cc is not on PATH"}
    run = subprocess.run([exe, "list-operators", "--framework", "XLA"], capture_output=True, text=True, timeout=300,
                         check=False)
    live = {line.split()[0] for line in run.stdout.splitlines() if line.strip() and not line.startswith(("#", "-"))}
    shipped = set(xla_audit.neuronx_cc_ops())
    return {"ok": True, "returncode": run.returncode, "missing_from_live": sorted(shipped - live),
            "new_in_live": sorted(live - shipped)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--step", default="all", choices=("all", "warm"))
    args = ap.parse_args(argv)
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="trnplan-first-run-")
    fr.header(accel.pjrt_device())
    print(f"xla on Neuron: {accel.xla_on_neuron()}; default route: {accel.backend_for('xla').auto_compile()[0]}")
    if args.step == "warm":
        return 0 if fr.report("warm", step_warm(cache_dir)) else 1
    ok = fr.report("plans", step_plans(cache_dir))
    fr.report("openxla", step_openxla(cache_dir))
    ok &= fr.report("complex", step_complex(cache_dir))
    ok &= fr.report("warm", fr.warm_process(os.path.abspath(__file__), cache_dir))
    fr.report("operators", step_operators())
    print(f"first run (xla, lazy): {'PASSED' if ok else 'FAILED'}; plan cache and compile cache kept in {cache_dir}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
