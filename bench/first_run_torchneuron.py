"""First run on a trn2/trn3 with TorchNeuron (torch-neuronx 2.13/2.14, the native ``neuron`` device).

    python bench/first_run_torchneuron.py --cache-dir /tmp/fr 2>&1 | tee first-run-torchneuron.txt

Nothing of this has run on Trainium yet; docs/trainium.md shows the output expected and what the
stand-in run (tests/test_first_run.py) printed. Steps, each a ``FIRST-RUN-RESULT`` line:

1. ``plans``     dft-gemm 256 and butterfly 1024 (batch 4) on ``neuron`` with
                 ``torch.compile(backend="neuron")``, ``execute_split`` against numpy complex128 at
                 5e-7; compile seconds and NEFFs written (``TORCH_NEURONX_NEFF_CACHE_DIR``) per plan.
2. ``fallback``  ``torch_neuronx.get_fallback_ops()`` empty (trnplan set
                 ``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1`` unless you did).
3. ``probe``     the precision probe ran through the compiled route (not assumed).
4. ``warm``      a second process, ``TRNPLAN_WISDOM_ONLY=1``, same plan cache: wisdom hits, the same
                 accuracy, zero new NEFFs.

Exit status 0 only if every step passed. The plan cache directory (``--cache-dir``) holds the
NEFF cache (``neff/``) and is kept.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import _first_run as fr

fr.prelude()

import torch

import trnplan
from trnplan.cache import PlanCache


def _plans(cache_dir: str) -> list:
    return [trnplan.plan_many(n, batch, device="neuron", strategy=strategy, cache=PlanCache(cache_dir))
            for n, batch, strategy in fr.PLANS]


def step_plans(cache_dir: str) -> dict:
    rows, neffs = [], os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR")
    for (n, batch, strategy), seed in zip(fr.PLANS, (1, 2), strict=True):
        before = fr.count_neffs(os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR"))
        plan = trnplan.plan_many(n, batch, device="neuron", strategy=strategy, cache=PlanCache(cache_dir))
        err = fr.split_error(plan, plan.device, seed)
        neffs = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR")
        rows.append({"plan": str(plan.tree), "route": plan.provenance.compile_mode, "error": err,
                     "compile_s": round(plan.provenance.compile_s, 2),
                     "new_neffs": fr.count_neffs(neffs) - before, "ok": err <= fr.BAR and
                     plan.provenance.compile_mode == "dynamo"})
        print(plan.explain(full=True))
    return {"ok": all(r["ok"] for r in rows), "rows": rows, "neff_cache": neffs}


def step_fallback() -> dict:
    import torch_neuronx  # TorchNeuron's op tracking (runtimes.md §2)

    ops = list(torch_neuronx.get_fallback_ops())
    return {"ok": not ops, "fallback_ops": ops,
            "disable_fallback": os.environ.get("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION")}


def step_probe(cache_dir: str) -> dict:
    plan = _plans(cache_dir)[0]
    probe = plan.provenance.probe
    return {"ok": "probed on" in probe and "dynamo route" in probe, "probe": probe,
            "origin": plan.provenance.probe_origin}


def step_warm(cache_dir: str) -> dict:
    neffs = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR") or os.path.join(cache_dir, "neff")
    before = fr.count_neffs(neffs)
    plans = _plans(cache_dir)
    errors = [fr.split_error(p, p.device, seed) for p, seed in zip(plans, (1, 2), strict=True)]
    new = fr.count_neffs(neffs) - before
    origins = [p.provenance.origin for p in plans]
    return {"ok": all(e <= fr.BAR for e in errors) and new == 0 and origins == ["wisdom hit"] * len(plans),
            "errors": errors, "origins": origins, "neffs_before": before, "new_neffs": new}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--step", default="all", choices=("all", "warm"))
    args = ap.parse_args(argv)
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="trnplan-first-run-")
    fr.header(f"neuron ({torch._C._get_privateuse1_backend_name()} PrivateUse1 backend)")
    if args.step == "warm":
        return 0 if fr.report("warm", step_warm(cache_dir)) else 1
    ok = fr.report("plans", step_plans(cache_dir))
    ok &= fr.report("fallback", step_fallback())
    ok &= fr.report("probe", step_probe(cache_dir))
    ok &= fr.report("warm", fr.warm_process(os.path.abspath(__file__), cache_dir))
    print(f"first run (TorchNeuron): {'PASSED' if ok else 'FAILED'}; plan cache and NEFFs kept in {cache_dir}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
