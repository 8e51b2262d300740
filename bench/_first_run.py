"""What the device first-run scripts share (bench/first_run_xla.py, bench/first_run_torchneuron.py).

Each script prints versions, flags and the PJRT device, runs a few steps, prints one
``FIRST-RUN-RESULT {json}`` line per step and exits non-zero if any step failed. A "warm" step
runs in a second process (the same script with ``--step warm``) that plans from the first one's
plan cache under ``TRNPLAN_WISDOM_ONLY=1``.

``FIRST_RUN_PRELUDE=module:function`` (tests only) calls that function first in every process of
the script, the second one included: it is how the stand-in tests make a CPU look like a trn1 or
a trn2 (tests/xla/trn1_prelude.py, tests/neuron_device_standin.py). Nothing here knows about it.
"""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import platform
import subprocess
import sys

import numpy as np
import torch

RESULT = "FIRST-RUN-RESULT "
#: the plans every route checks: (n, batch, forced strategy); the bar is the fp32 bar, 5e-7
PLANS = ((256, 4, "dft-gemm"), (1024, 4, "butterfly"))
BAR = 5e-7


def prelude() -> None:
    """Run ``FIRST_RUN_PRELUDE`` (tests' stand-ins) before anything imports trnplan's device code."""
    spec = os.environ.get("FIRST_RUN_PRELUDE")
    if spec:
        module, _, func = spec.partition(":")
        getattr(importlib.import_module(module), func)()


def header(pjrt: str) -> None:
    import trnplan
    from trnplan.backends import neuron_runtime

    rt = neuron_runtime.detect()
    print(f"trnplan {trnplan.__version__}, torch {torch.__version__}, Python {platform.python_version()}, "
          f"{platform.machine()}, {platform.node()}")
    for key, value in rt.versions().items():
        print(f"  {key:<26} {value}")
    print(f"runtime: {rt.kind or 'NONE'} — {rt.reason}; instance family {rt.family or 'unknown'}; "
          f"Neuron device files {rt.chips}")
    print(f"PJRT device: {pjrt or '(none)'}")
    for var in ("NEURON_CC_FLAGS", "NEURON_COMPILE_CACHE_URL", "TORCH_NEURONX_NEFF_CACHE_DIR",
                "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS",
                "NEURON_RT_VISIBLE_CORES", "TRNPLAN_CACHE_DIR"):
        print(f"  {var}={os.environ.get(var, '(unset)')}")


def split_error(plan, device, seed: int) -> float:
    """``plan.execute_split`` on seeded data moved to ``device`` (split on the host), against numpy complex128."""
    n, batch = plan.problem.shape[-1], plan.problem.batch
    g = np.random.default_rng(seed)
    x = g.standard_normal((batch, n)) + 1j * g.standard_normal((batch, n))
    yr, yi = plan.execute_split((torch.from_numpy(x.real).float().to(device), torch.from_numpy(x.imag).float().to(device)))
    y = yr.cpu().double().numpy() + 1j * yi.cpu().double().numpy()
    ref = np.fft.fft(x)
    return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))


def count_neffs(directory: str | None) -> int:
    """NEFF files under ``directory`` (a Neuron compile cache), 0 if unset or absent."""
    if not directory or directory.startswith("s3://") or not os.path.isdir(directory):
        return 0
    return sum(1 for _ in pathlib.Path(directory).rglob("*.neff"))


def report(name: str, result: dict) -> bool:
    print(RESULT + json.dumps({"step": name, **result}, default=str), flush=True)
    return bool(result.get("ok"))


def warm_process(script: str, cache_dir: str, extra_env: dict | None = None) -> dict:
    """Run ``script --step warm`` in a fresh process with ``TRNPLAN_WISDOM_ONLY=1``; its RESULT."""
    env = {**os.environ, "TRNPLAN_WISDOM_ONLY": "1", **(extra_env or {})}
    run = subprocess.run([sys.executable, script, "--step", "warm", "--cache-dir", cache_dir], capture_output=True,
                         text=True, env=env, timeout=1800, check=False)
    print(run.stdout[-6000:], end="")
    lines = [line for line in run.stdout.splitlines() if line.startswith(RESULT)]
    if run.returncode != 0 or not lines:
        return {"ok": False, "returncode": run.returncode, "stderr": run.stderr[-3000:]}
    return json.loads(lines[-1][len(RESULT):])
