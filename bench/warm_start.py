"""Warm start: a fresh process's ``plan_many`` on a warm plan cache vs the cold plan + compile.

    python bench/warm_start.py [--n 4096] [--batch 16] [--repeat 3] [--markdown docs/cache.md]

Issue 19, item 7: a fresh process's ``plan_many(4096, batch=16, compile="aot")`` on a warm cache
took 463 ms, 448 ms of it importing scipy, pyFFTW and mkl_fft to put their versions in the
fingerprint. Goal: warm ``plan_many`` under 50 ms and at least 100× faster than the cold compile.

For each case (``compile="aot"`` and ``compile="eager"``, both ``effort="estimate"``) one fresh
Python process plans into an empty cache directory (cold: plan, compile, store), then
``--repeat`` fresh processes make the same call on that directory (warm). Every child times,
inside itself: ``import torch``, then ``import trnplan``, the ``plan_many`` call, the plan's
first execute (an AOT package's shared library is loaded at its first call), and a breakdown of
``plan_many`` by wrapping trnplan's internals with exclusive timers (a wrapped call's time
excludes the wrapped calls inside it): the fingerprint, opening the cache, reading it (wisdom,
probe and calibration records), writing it (hit counters, new records), replaying a stored tree
through the planner, the planner's search, lowering the tree to modules, loading the artifact,
compiling, and importing host FFT libraries; "other" is the rest. It also lists which of scipy,
pyFFTW and mkl_fft the child had imported after ``plan_many``, and how long Python's garbage
collector ran inside ``import trnplan`` and inside ``plan_many`` (``gc.callbacks``). The warm columns are the median
warm process (by ``plan_many`` time).

Children run with Python's bytecode cache on (``PYTHONDONTWRITEBYTECODE`` removed from their
environment), as an installed trnplan has it, after one child has imported what the runs import
(trnplan, Inductor, torch.export, the installed host libraries), so that no timed run pays for
compiling sources to bytecode: without the cache every ``import trnplan`` recompiles trnplan's
sources (about 60 ms more here).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

from _docs import replace_section  # bench/ is on sys.path when a bench script runs

#: the breakdown's columns, in order (labels of CHILD's timers)
PARTS = ("fingerprint", "cache open", "cache reads", "cache writes", "replay", "search", "lower",
         "artifact load", "compile", "library imports")

CHILD = r"""
import gc, json, sys, time
gcs = []  # (start, end) of every garbage collection, from gc.callbacks

def on_gc(phase, info, _open=[]):
    if phase == "start":
        _open.append(time.perf_counter())
    elif _open:
        gcs.append((_open.pop(), time.perf_counter()))

def gc_s(a, b):
    return sum(e - s for s, e in gcs if s >= a and e <= b)

gc.callbacks.append(on_gc)
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import trnplan
t2 = time.perf_counter()
import_libraries = [m for m in ("scipy", "pyfftw", "mkl_fft") if m in sys.modules]
import collections, functools, statistics
from trnplan.backends import get_backend
from trnplan.cache.store import PlanCache
from trnplan.kernels import hostlib
from trnplan.plan import provide
try:
    from trnplan.plan import artifact
except ImportError:  # an older trnplan: the artifact steps were in provide
    artifact = provide
from trnplan.planner.planner import Planner

excl, stack = collections.Counter(), []

def wrap(owner, name, label):
    fn = getattr(owner, name, None)
    if fn is None:  # an older trnplan without it (comparing before/after a change): not broken down
        return
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        stack.append(0.0)
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent = time.perf_counter() - start
            excl[label] += spent - stack.pop()
            if stack:
                stack[-1] += spent
    setattr(owner, name, timed)

for owner, names, label in [
        (provide, ("fingerprint",), "fingerprint"),
        (PlanCache, ("_open",), "cache open"),
        (PlanCache, ("get_wisdom", "first_wisdom", "get_record", "wisdom_for_problem"), "cache reads"),
        (PlanCache, ("count", "add_wisdom", "update_wisdom", "add_record", "set_record", "add_artifact"),
         "cache writes"),
        (provide, ("_trusted_tree", "trusted_tree"), "replay"),
        (Planner, ("search",), "search"),
        (Planner, ("lower_plan",), "lower"),
        (PlanCache, ("get_artifact",), "artifact load"),
        (type(get_backend("cpu")), ("load_artifact",), "artifact load"),
        (provide, ("_compile_artifact",), "compile"),
        (artifact, ("_compile_artifact",), "compile"),
        (hostlib, ("_import_library",), "library imports")]:
    for name in names:
        wrap(owner, name, label)

t3 = time.perf_counter()
plan = trnplan.plan_many({n}, batch={batch}, compile={mode!r}, effort="estimate")
t3b = time.perf_counter()
plan_s = t3b - t3
libraries = [m for m in ("scipy", "pyfftw", "mkl_fft") if m in sys.modules]
x = torch.randn({batch}, {n}, dtype=torch.complex64)
t4 = time.perf_counter()
plan(x)
first_s = time.perf_counter() - t4
ts = []
for _ in range(20):
    t5 = time.perf_counter(); plan(x); ts.append(time.perf_counter() - t5)
pv = plan.provenance
print(json.dumps({{"import_torch_s": t1 - t0, "import_trnplan_s": t2 - t1, "import_gc_s": gc_s(t1, t2),
                  "plan_gc_s": gc_s(t3, t3b), "import_libraries": import_libraries, "plan_s": plan_s, "first_s": first_s,
                  "exec_s": statistics.median(ts), "parts": dict(excl), "libraries": libraries,
                  "origin": pv.origin, "artifact": pv.artifact, "compile_mode": pv.compile_mode,
                  "tree": str(plan.tree)}}))
"""


#: imports what the timed children import, so that their sources are compiled to bytecode beforehand
WARM_UP = """
import torch._export, torch._inductor, trnplan
from trnplan.kernels import hostlib
for name in hostlib.LIBRARIES:
    hostlib.library_module(name)
"""


def run_child(env: dict, n: int, batch: int, mode: str) -> dict:
    """One fresh process's measurement (the JSON line CHILD prints)."""
    code = CHILD.format(n=n, batch=batch, mode=mode)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"the child process failed (exit {out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_case(base_env: dict, n: int, batch: int, mode: str, repeat: int) -> dict:
    """Cold in an empty cache directory, then ``repeat`` warm processes on it."""
    with tempfile.TemporaryDirectory(prefix="trnplan-warm-") as cache_dir:
        env = {**base_env, "TRNPLAN_CACHE_DIR": cache_dir}
        cold = run_child(env, n, batch, mode)
        warms = [run_child(env, n, batch, mode) for _ in range(repeat)]
    warm = sorted(warms, key=lambda w: w["plan_s"])[len(warms) // 2]
    return {"mode": mode, "cold": cold, "warm": warm, "warm_plan_s": [w["plan_s"] for w in warms],
            "ratio": cold["plan_s"] / warm["plan_s"]}


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def table(cases: list[dict], n: int, batch: int) -> str:
    """The markdown table: one cold and one warm row per case."""
    head = (["case", "process", "origin", "`plan_many` ms", "first execute ms", *PARTS, "other",
             "libraries imported"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case in cases:
        for label in ("cold", "warm"):
            r = case[label]
            parts = [r["parts"].get(p, 0.0) for p in PARTS]
            other = r["plan_s"] - sum(parts)
            cells = [f"{batch}×{n} {case['mode']}", label, r["origin"], _ms(r["plan_s"]), _ms(r["first_s"]),
                     *(_ms(p) if p else "—" for p in parts), _ms(other), ", ".join(r["libraries"]) or "none"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(cases: list[dict]) -> list[str]:
    """One line per case: warm vs the goal, and the import times."""
    out = []
    for case in cases:
        warm_ms = case["warm"]["plan_s"] * 1e3
        ok = warm_ms < 50 and case["ratio"] >= 100
        spread = ", ".join(_ms(s) for s in case["warm_plan_s"])
        out.append(f"- compile={case['mode']!r}: cold {_ms(case['cold']['plan_s'])} ms, warm {warm_ms:.1f} ms "
                   f"(median of {spread} ms), cold / warm **{case['ratio']:.0f}×**"
                   + (f" — goal (warm < 50 ms and ≥ 100×) {'met' if ok else 'NOT met'}"
                      if case["mode"] == "aot" else " (eager: planning is itself milliseconds)"))
    for case in cases:
        w = case["warm"]
        out.append(f"- compile={case['mode']!r} warm: `{w['tree']}`, first execute {_ms(w['first_s'])} ms, then "
                   f"{w['exec_s'] * 1e6:.0f} µs per call (median of 20)")
    imports = [r for case in cases for r in (case["cold"], case["warm"])]
    torch_ms = statistics.median(r["import_torch_s"] for r in imports) * 1e3
    trn_ms = statistics.median(r["import_trnplan_s"] for r in imports) * 1e3
    gc_ms = statistics.median(r["import_gc_s"] for r in imports) * 1e3
    imported = ", ".join(sorted({m for r in imports for m in r["import_libraries"]})) or "none"
    plan_gc_ms = max(r["plan_gc_s"] for case in cases for r in (case["warm"],)) * 1e3
    out.append(f"- `import torch` {torch_ms:.0f} ms, then `import trnplan` {trn_ms:.0f} ms, of which {gc_ms:.0f} ms "
               f"is Python's garbage collector (a full collection over torch's objects that trnplan's import "
               f"happens to trigger; `gc.freeze()` after an application's imports avoids it) (medians of "
               f"{len(imports)} processes); host libraries imported by `import trnplan`: {imported}. Garbage collection inside "
               f"the warm `plan_many`: at most {plan_gc_ms:.1f} ms")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3, help="warm processes per case (the median is shown)")
    ap.add_argument("--modes", nargs="+", default=["aot", "eager"], choices=["aot", "eager"])
    ap.add_argument("--markdown", default=None, help="write the table into this file's bench:warm_start section")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "TRNPLAN_WISDOM_ONLY")}
    subprocess.run([sys.executable, "-c", WARM_UP], env=env, check=True)  # fill the bytecode cache
    cases = []
    for mode in args.modes:
        cases.append(measure_case(env, args.n, args.batch, mode, args.repeat))
        c = cases[-1]
        print(f"{args.batch}×{args.n} {mode}: cold {_ms(c['cold']['plan_s'])} ms, warm {_ms(c['warm']['plan_s'])} "
              f"ms ({c['warm']['origin']}), ratio {c['ratio']:.0f}×", flush=True)
    import torch  # the machine line only, after the children ran

    text = table(cases, args.n, args.batch)
    lines = summary(cases)
    print(text, *lines, sep="\n")
    if args.markdown:
        when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        machine = (f"Measured {when} on {os.cpu_count()} cores ({torch.get_num_threads()} torch threads), "
                   f"torch {torch.__version__}, {platform.machine()}, Python {platform.python_version()}; "
                   f"`python bench/warm_start.py --markdown {args.markdown}`.")
        replace_section(args.markdown, "warm_start", "\n".join([machine, "", text, "", *lines]))


if __name__ == "__main__":
    main()
