"""The ``trnplan`` command line.

    trnplan plan SHAPE [--batch B] [--kind K] [--inverse] [--precision P] [--strategy S] [--effort E]
                 [--explain] [--verify]
    trnplan solvers
    trnplan bench [--quick] [--out DIR] [--docs PATH]
    trnplan precompile MANIFEST_OR_PROBLEM... [--cache-dir D] [--jobs N] [--backward]
    trnplan calibrate [--quick] [--threads 1,2]
    trnplan cache info|list|clear|export FILE|import FILE [--trust-artifacts|--plans-only] [--cache-dir D]
    trnplan audit [SHAPE] [--batch B] [--kind K] [--precision P] [--strategy S] [--grid]

``plan`` plans the transform, runs it on seeded random data, prints the tree and the execute
time (median of repeats after a warm-up) and, with ``--verify``, the relative L2 error against
numpy.fft in complex128; it exits with status 1 when that error is over the plan's bound.

Exit codes: 0 ok; 1 over the bound (also: a precompile entry failed, an audit finding, a bundle
entry rejected); 2 a usage, setting or planning error, or a damaged cache; 3 a failure while
running (out of memory, a device error). Errors are one "error: ..." line on stderr, never a
traceback.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from trnplan import __version__
from trnplan.cache import CacheWarning, PlanCache, default_cache, default_cache_dir
from trnplan.cache.bundle import export_bundle, import_bundle
from trnplan.core import config
from trnplan.core.accuracy import DEFAULT_TOL, reference
from trnplan.core.errors import TrnplanError
from trnplan.core.problem import KINDS, Problem
from trnplan.plan.api import plan_many
from trnplan.planner import registry
from trnplan.planner.measure import Measurement
from trnplan.planner.registry import SOLVERS
from trnplan.tools import benchsuite, xla_audit
from trnplan.tools.audit import audit, audit_grid
from trnplan.tools.calibrate import fit_cpu_model
from trnplan.tools.precompile import PROBLEM_SYNTAX, load_manifest, parse_problem, precompile, summary_table

#: exit codes: 1 only for a verified error over the bound (and failed entries, audits, rejected
#: bundle entries); 2 a usage, setting or planning error; 3 a failure while running (out of
#: memory, a device error) — always a one-line "error:" message on stderr, never a traceback
EXIT_OK, EXIT_OVER_BOUND, EXIT_USAGE, EXIT_FAILURE = 0, 1, 2, 3
PRECISION_CHOICES = ["fp32", "fp64", "bf16", "bf16x3", "bf16x6", "tf32", "auto"]


def parse_shape(text: str) -> tuple[int, ...]:
    """``"4096"`` → (4096,), ``"64x64"`` or ``"64,64"`` → (64, 64)."""
    parts = text.replace(",", "x").split("x")
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"SHAPE must be lengths like 4096 or 64x64, got {text!r}") from None
    if any(n < 1 for n in shape):
        raise argparse.ArgumentTypeError(f"SHAPE lengths must be positive, got {text!r}")
    return shape


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="trnplan",
        description="Plan, run and explain FFTs with trnplan (plan-and-execute FFT engine).",
        epilog="Examples: trnplan plan 4096 --batch 64 --explain --verify | "
               "trnplan plan 4097 --strategy bluestein --verify | trnplan solvers",
    )
    ap.add_argument("--version", action="version", version=f"trnplan {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    _add_plan(sub)
    sub.add_parser("solvers", help="list the registered solvers in planner order",
                   description="List the registered solvers, in the order the planner tries them.")
    _add_precompile(sub)
    _add_calibrate(sub)
    _add_cache(sub)
    _add_audit(sub)
    benchsuite.add_parser(sub)
    return ap


def _add_plan(sub) -> None:
    p = sub.add_parser("plan", help="plan a transform, run it on random data, time it, optionally verify",
                       description="Plan a transform, run it on seeded random complex data, print the plan "
                                   "tree and the median execute time; --verify compares with numpy.fft in "
                                   "complex128 and exits 1 when the relative L2 error is over the bound.")
    p.add_argument("shape", type=parse_shape, metavar="SHAPE",
                   help="transform shape, e.g. 4096, 256x256 or 32x64x64 (for r2c/c2r the real shape)")
    p.add_argument("--kind", choices=list(KINDS), default="c2c",
                   help="c2c (default), r2c (real input, half spectrum out) or c2r (its inverse); dct1…dct4, "
                        "dst1…dst4: scipy.fft's DCT/DST types I–IV (--inverse: idct/idst)")
    p.add_argument("--batch", type=int, default=1, help="number of transforms per call (default 1)")
    p.add_argument("--inverse", action="store_true", help="plan the inverse transform")
    p.add_argument("--precision", choices=PRECISION_CHOICES, default=None,
                   help="arithmetic: fp32 (complex64, default), fp64 (complex128), bf16 / bf16x3 / bf16x6 (bf16 "
                        "GEMM operands, 1, 3 or 6 products), tf32 (CUDA), or auto (cheapest mode meeting --tol)")
    p.add_argument("--dtype", choices=["complex64", "complex128"], default=None,
                   help="data type (default: complex128 for --precision fp64, else complex64)")
    p.add_argument("--norm", choices=["backward", "ortho", "forward"], default="backward",
                   help="scaling, as in torch.fft (default backward)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda[:i]")
    p.add_argument("--cores", type=int, default=1, help="cores to split the work over (default 1)")
    p.add_argument("--strategy", default=None,
                   help="force a solver (" + ", ".join(s.name for s in SOLVERS) + ") or a tree s-expression, "
                        "e.g. '(four-step 4096=64x64 (dft-gemm) (stockham))'")
    p.add_argument("--tol", type=float, default=None,
                   help="relative L2 error bound (default: the precision's bar, "
                        + ", ".join(f"{bar:g} {mode}" for mode, bar in DEFAULT_TOL.items()) + ")")
    p.add_argument("--explain", action="store_true", help="print the full explanation (tree, costs, candidates)")
    p.add_argument("--verify", action="store_true",
                   help="compare with numpy.fft (complex128); exit 1 if the error is over the bound")
    p.add_argument("--repeats", type=int, default=20, help="timed repeats after warm-up (default 20)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random input (default 0)")
    p.add_argument("--compile", choices=["auto", "eager", "aot", "inductor"], default="auto",
                   help="artifact: eager (none), aot (AOTInductor .pt2), inductor (torch.compile in this process, "
                        "nothing kept), auto (per device; eager on the CPU)")
    _cache_args(p)
    p.add_argument("--no-cache", action="store_true", help="bypass the on-disk plan cache")
    p.add_argument("--effort", choices=["estimate", "measure", "patient"], default="estimate",
                   help="estimate: the cost model picks (default); measure: time the model's best candidates "
                        "and keep the fastest; patient: time every candidate (see TRNPLAN_TIMELIMIT)")
    p.add_argument("--wisdom-only", action="store_true",
                   help="never plan or compile: fail unless the cache has this plan (as TRNPLAN_WISDOM_ONLY=1)")


MANIFEST_EXAMPLE = """\
problems: manifest files (.toml) and/or problems on the command line, as
  [KIND:]SHAPE[@BATCH]   KIND c2c (default), c2c-inv, r2c, c2r; SHAPE 4096 or 256x256
e.g.  trnplan precompile c2c:4096@64 c2c-inv:4096@64 r2c:256x256@8 --cache-dir /opt/trnplan
      trnplan precompile plans.toml --jobs 4 --cache-dir /opt/trnplan

a manifest (TOML): one [[plan]] per problem, keys as plan_many's arguments
  [defaults]              # optional: applies to every [[plan]] that does not set a key
  compile = "auto"        # auto | eager | aot | neuron
  backward = true         # also the adjoint plan loss.backward() runs (training)

  [[plan]]
  shape = [4096]          # required: an int or a list (the real shape for r2c/c2r)
  batch = 64
  kind = "c2c"            # c2c | r2c | c2r
  inverse = false
  precision = "fp32"      # fp32 fp64 bf16 bf16x3 bf16x6 tf32 auto
  dtype = "complex64"     # complex64 | complex128
  norm = "backward"       # backward | ortho | forward
  # also: device, cores, effort, strategy, tol, verify

production then runs with TRNPLAN_CACHE_DIR=<that directory> TRNPLAN_WISDOM_ONLY=1
"""


def _add_precompile(sub) -> None:
    pc = sub.add_parser("precompile", help="plan and compile problems (a manifest, or on the command line) into a cache",
                        description="Plan (and compile, for artifact modes) every problem into the plan cache; "
                                    "prints a summary table; exits 1 if any entry failed.",
                        epilog=MANIFEST_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    pc.add_argument("problems", nargs="+", metavar="MANIFEST_OR_PROBLEM",
                    help="a TOML manifest, or a problem " + PROBLEM_SYNTAX)
    _cache_args(pc)
    pc.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    pc.add_argument("--quiet", action="store_true", help="no progress bar (there is none in a pipe either)")
    group = pc.add_argument_group("options of the problems given on the command line (a manifest sets its own)")
    group.add_argument("--batch", type=int, default=None, help="batch where a problem has no @BATCH (default 1)")
    group.add_argument("--precision", choices=PRECISION_CHOICES, default=None)
    group.add_argument("--dtype", choices=["complex64", "complex128"], default=None)
    group.add_argument("--norm", choices=["backward", "ortho", "forward"], default=None)
    group.add_argument("--device", default=None, help="cpu (default), cuda, neuron, ...")
    group.add_argument("--cores", type=int, default=None, help="cores to split the work over (default 1)")
    group.add_argument("--effort", choices=["estimate", "measure", "patient"], default=None)
    group.add_argument("--compile", choices=["auto", "eager", "aot", "neuron"], default=None)
    group.add_argument("--tol", type=float, default=None, help="relative L2 error bound (default per precision)")
    pc.add_argument("--backward", action="store_true",
                    help="also precompile every problem's adjoint plan, which autograd's backward pass runs "
                         "(training); in a manifest: backward = true")


def _add_calibrate(sub) -> None:
    ca = sub.add_parser("calibrate", help="fit the CPU cost model on this machine and store it in the plan cache",
                        description="Time the CPU FFT leaves (torch.fft, pyFFTW, mkl_fft, scipy) through trnplan's "
                                    "plans on a training grid, fit the leaf cost model, print its error on a "
                                    "held-out grid (and the uncalibrated constants'), and store the fit in the plan "
                                    "cache, per machine and torch thread count; effort 'estimate' then prices with it. "
                                    "Run it on a quiet machine: timing is as good as the machine is quiet.")
    ca.add_argument("--quick", action="store_true", help="the smaller grids (about 10-40 s)")
    ca.add_argument("--threads", default=None, help="comma-separated torch thread counts (default: the current)")
    ca.add_argument("--seconds", type=float, default=None, help="time limit per thread count (default 40 quick, 600)")
    _cache_args(ca)


def _add_cache(sub) -> None:
    ca = sub.add_parser("cache", help="inspect or manage the on-disk plan cache",
                        description="info: location, sizes and counters; list: one line per stored plan "
                                    "(--measured: the measured ones, with their age, noise and ratio to the "
                                    "default); drop --measured [--older-than DAYS]: forget measured plans, so "
                                    "they are measured again; clear: delete every entry; export FILE: bundle the "
                                    "cache into one file (with the Neuron compiled graphs of its plans); import "
                                    "FILE: verify and add a bundle's entries (compiled graphs into this cache's "
                                    "Neuron compile cache).")
    ca.add_argument("action", choices=["info", "list", "drop", "clear", "export", "import"])
    ca.add_argument("file", nargs="?", metavar="FILE", help="the bundle file (export, import)")
    ca.add_argument("--measured", action="store_true",
                    help="list/drop: only plans made with effort measure or patient")
    ca.add_argument("--older-than", type=float, default=None, metavar="DAYS",
                    help="drop: only measured plans measured more than DAYS days ago")
    ca.add_argument("--trust-artifacts", action="store_true",
                    help="import: also import the bundle's compiled artifacts and Neuron compiled graphs (NEFFs), "
                         "which are native code this machine will run; only for bundles from a builder you trust")
    ca.add_argument("--plans-only", action="store_true",
                    help="import: import the bundle's plans without its artifacts (compiled here when used)")
    _cache_args(ca)


def _add_audit(sub) -> None:
    au = sub.add_parser("audit", help="check a plan's Neuron lowering against the documented operator limits",
                        description="Plan SHAPE on the Neuron cost profile, lower it on the CPU, export it with "
                                    "torch.export and check every node (dtypes, ops, static shapes) against the "
                                    "Neuron allowlist; --grid audits every solver x precision x representative size "
                                    "(the CI check). Where torch-xla is installed, the same tree is also lowered on the xla "
                                    "device and its HLO and StableHLO checked against neuronx-cc's operator list. "
                                    "Exits 1 if any finding. Needs no torch-neuronx.")
    au.add_argument("shape", type=parse_shape, metavar="SHAPE", nargs="?", default=None,
                    help="transform shape, e.g. 4096 or 32x32 (omit with --grid)")
    au.add_argument("--batch", type=int, default=4, help="batch (default 4)")
    au.add_argument("--kind", choices=["c2c", "r2c", "c2r"], default="c2c")
    au.add_argument("--inverse", action="store_true", help="the inverse transform")
    au.add_argument("--precision", choices=["fp32", "fp64", "bf16", "bf16x3", "bf16x6"], default="fp32")
    au.add_argument("--strategy", default=None, help="force a solver or tree, as in `trnplan plan`")
    au.add_argument("--tol", type=float, default=None, help="error bound to plan to (default: the precision's bar)")
    au.add_argument("--grid", action="store_true", help="audit every solver x precision x representative size")


def _cache_args(parser) -> None:
    parser.add_argument("--cache-dir", default=None,
                        help="plan cache directory (default $TRNPLAN_CACHE_DIR, else ~/.cache/trnplan)")


def _cache(args):
    if getattr(args, "no_cache", False):
        return None
    return PlanCache(args.cache_dir) if args.cache_dir else default_cache()


def _cmd_plan(args) -> int:
    if args.batch < 1 or args.repeats < 1:
        print("error: --batch and --repeats must be positive", file=sys.stderr)
        return EXIT_USAGE
    dtype = getattr(torch, args.dtype) if args.dtype else torch.complex128 if args.precision == "fp64" \
        else torch.complex64
    if args.kind in ("r2c", "c2r") and args.inverse:
        print("error: --inverse is implied by --kind c2r and impossible for r2c; drop it", file=sys.stderr)
        return EXIT_USAGE
    if args.verify and args.device.split(":")[0] == "meta":
        print("error: --verify compares computed values, and the meta device computes none; drop --verify, or "
              "plan on a device that computes (--device cpu)", file=sys.stderr)
        return EXIT_USAGE
    inverse = True if args.kind == "c2r" else args.inverse
    plan = plan_many(args.shape, batch=args.batch, kind=args.kind, inverse=inverse, dtype=dtype, precision=args.precision,
                     norm=args.norm, device=args.device, cores=args.cores, strategy=args.strategy, tol=args.tol,
                     cache=_cache(args),
                     compile=args.compile, effort="wisdom_only" if args.wisdom_only else args.effort)
    rng = np.random.default_rng(args.seed)
    p = plan.problem
    shape = (args.batch, *p.in_shape)
    x64 = rng.standard_normal(shape) + (0 if p.real_input else 1j * rng.standard_normal(shape))
    x = torch.from_numpy(x64).to(dtype=p.real_dtype if p.real_input else dtype, device=plan.device)
    sync = (lambda: torch.cuda.synchronize(plan.device)) if plan.device.type == "cuda" else (lambda: None)
    for _ in range(3):
        y = plan.execute(x)
    sync()
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        y = plan.execute(x)
        sync()
        times.append((time.perf_counter() - t0) * 1e6)
    print(plan.explain(full=True) if args.explain else f"plan: {plan.problem.describe()}\ntree: {plan.tree}")
    print(f"\nexecute: median {statistics.median(times):.1f} µs over {args.repeats} runs "
          f"(predicted {plan.tree.time_us:.1f} µs)")
    if not args.verify:
        return EXIT_OK
    axes = tuple(range(1, len(shape)))
    if p.r2r:
        ref = reference(p, x64)  # scipy.fft's DCT/DST in float64
    elif p.kind == "r2c":
        ref = np.fft.rfftn(x64, axes=axes, norm=args.norm)
    elif p.kind == "c2r":
        ref = np.fft.irfftn(x64, s=p.shape, axes=axes, norm=args.norm)
    else:
        ref = (np.fft.ifftn if args.inverse else np.fft.fftn)(x64, axes=axes, norm=args.norm)
    err = float(np.linalg.norm(y.cpu().numpy() - ref) / np.linalg.norm(ref))
    ok = err <= plan.tol
    print(f"verify:  relative L2 error {err:.2e} vs {'scipy.fft float64' if p.r2r else 'numpy.fft complex128'}; bound {plan.tol:.0e}; "
          f"predicted ≤ {plan.tree.error:.1e} -> {'OK' if ok else 'OVER THE BOUND'}")
    return EXIT_OK if ok else EXIT_OVER_BOUND


def _cmd_solvers(_args) -> int:
    for s in registry.solvers():
        kind = "composite" if s.composite else "leaf"
        doc = (sys.modules[type(s).__module__].__doc__ or "").strip().splitlines()[0]
        print(f"{s.name:<10} v{s.version}  {kind:<9}  {doc}")
    return EXIT_OK


def _precompile_entries(args) -> list[dict]:
    """The manifests' entries and the command line's problems, in the order given."""
    options = {k: getattr(args, k) for k in ("batch", "precision", "dtype", "norm", "device", "cores", "effort",
                                             "compile", "tol") if getattr(args, k) is not None}
    if options.get("precision") == "fp64":  # fp64 computes on complex128 data: the dtype it implies
        options.setdefault("dtype", "complex128")
    entries = []
    for item in args.problems:
        if item.endswith(".toml") or Path(item).is_file():
            entries += load_manifest(item)
        else:
            entries.append({**options, **parse_problem(item)})
    if args.backward:
        entries = [{**e, "backward": e.get("backward", True)} for e in entries]
    return entries


def _cmd_calibrate(args) -> int:
    try:
        threads = [int(t) for t in args.threads.split(",")] if args.threads else [torch.get_num_threads()]
    except ValueError:
        print(f"error: --threads takes counts like 1,2; got {args.threads!r}", file=sys.stderr)
        return EXIT_USAGE
    if any(t < 1 for t in threads):
        print(f"error: --threads takes positive counts, got {args.threads!r}", file=sys.stderr)
        return EXIT_USAGE
    cache = _cache(args)
    for t in threads:
        report = fit_cpu_model(cache, threads=t, quick=args.quick, seconds=args.seconds)
        print(report.describe())
        print(f"stored in {cache.path}" if report.stored else "not stored (nothing was timed)")
    return EXIT_OK


def _cmd_precompile(args) -> int:
    results = precompile(_precompile_entries(args), cache=_cache(args), jobs=args.jobs,
                         progress=False if args.quiet else None)
    print(summary_table(results))
    failed = [r for r in results if not r.ok]
    print(f"\n{len(results) - len(failed)} of {len(results)} plan(s) stored in {_cache(args).path}"
          + (f"; {len(failed)} FAILED" if failed else ""))
    return EXIT_OVER_BOUND if failed else EXIT_OK


def _inspected_cache(args):
    """The cache that ``trnplan cache info|list|drop|clear|export`` reads: never created by reading
    (pointed at a system directory, it would write a cache.db there)."""
    return PlanCache(args.cache_dir or default_cache_dir(), create=False)


def _cache_state(cache, action: str) -> int | None:
    """An exit code when the cache is missing or damaged (said on stdout or stderr), else None."""
    if not (cache.path / "cache.db").is_file():
        if action == "export":
            print(f"error: no plan cache at {cache.path}", file=sys.stderr)
            return EXIT_USAGE
        print(f"no plan cache at {cache.path} (nothing stored yet)")
        return EXIT_OK
    if cache.damaged is None:
        return None
    if action == "clear":
        print(cache.rebuild())
        return EXIT_OK
    print(f"error: the plan cache database in {cache.path} is damaged ({cache.damaged}); `trnplan cache clear "
          f"--cache-dir {cache.path}` moves it aside and starts a new one", file=sys.stderr)
    return EXIT_USAGE


def _cmd_cache(args) -> int:
    if args.action in ("export", "import") and not args.file:
        print(f"error: trnplan cache {args.action} needs a FILE", file=sys.stderr)
        return EXIT_USAGE
    cache = _cache(args) if args.action == "import" else _inspected_cache(args)
    if args.action != "import":
        with warnings.catch_warnings():  # the damage is said once, below, as an error
            warnings.simplefilter("ignore", CacheWarning)
            state = _cache_state(cache, args.action)
        if state is not None:
            return state
    if args.action == "info":
        for key, value in cache.stats().items():
            print(f"{key:<22} {value}")
    elif args.action == "list":
        _list_records(cache, args.measured)
    elif args.action == "drop":
        return _drop_measured(cache, args)
    elif args.action == "clear":
        print(f"removed {cache.clear()} entries from {cache.path}")
    elif args.action == "export":
        counts = export_bundle(cache, args.file)
        print(f"exported {counts['wisdom']} plan(s), {counts['artifacts']} artifact(s) and {counts['compiled']} "
              f"Neuron compiled file(s) to {args.file}")
        if counts["compiled_missing"]:  # the importing side would compile those graphs (a WisdomMiss there)
            print(f"trnplan: {len(counts['compiled_missing'])} compiled file(s) recorded for these plans are gone or "
                  f"changed and were left out: {', '.join(counts['compiled_missing'][:5])}; plan them again here "
                  f"(or precompile) before exporting", file=sys.stderr)
            return EXIT_FAILURE
    else:
        report = import_bundle(cache, args.file, trust_artifacts=args.trust_artifacts, plans_only=args.plans_only)
        print(f"{report} into {cache.path}")
        return EXIT_OVER_BOUND if report.rejected else EXIT_OK
    return EXIT_OK


def _problem_text(rec: dict) -> str:
    p = rec["problem"]
    return f"{p['kind']} {'inv' if p['inverse'] else 'fwd'} {tuple(p['shape'])}×{p['batch']} {p['precision']} {p['device']}"


def _measured(rec: dict) -> Measurement | None:
    """The record's measurement, or None (an estimate's record, or one that does not parse)."""
    try:
        return Measurement.from_dict(rec["measurement"]) if rec.get("measurement") else None
    except (KeyError, TypeError, ValueError):
        return None


def _measured_text(m: Measurement) -> str:
    """Age, noise, rounds and the winner's ratio to the default, for ``cache list --measured``."""
    age = f"{m.age_s() / 86400:.1f} days old" if m.measured_at else "age unknown (old record)"
    w = m.winner
    vs = ("the default" if w.default else f"{w.vs_default:.2f}× the default {m.default_tree}") if w.vs_default is not None \
        else "no default"
    noise = f"noise {w.noise:.1%}" if w.noise is not None else "noise not recorded"
    return f"{m.effort}, {age}, {noise}, {w.rounds} rounds, threads {m.threads or '?'}: {w.tree} ({vs})"


def _list_records(cache, measured_only: bool) -> None:
    for key, rec in cache.records():
        m = _measured(rec)
        if measured_only and m is None:
            continue
        arts = ", ".join(f"{mode} {a.get('bytes', 0) / 1e6:.2f} MB" for mode, a in rec.get("artifacts", {}).items())
        line = f"{key}  {_problem_text(rec)}  {rec['tree'].get('solver')}  {arts or 'eager'}"
        print(line + (f"  [{_measured_text(m)}]" if m is not None else ""))


def _drop_measured(cache, args) -> int:
    """``cache drop --measured [--older-than DAYS]``: forget measured records (re-measured when next planned)."""
    if not args.measured:
        print("error: trnplan cache drop takes --measured (use clear to delete everything)", file=sys.stderr)
        return EXIT_USAGE
    if args.older_than is not None and args.older_than < 0:
        print(f"error: --older-than takes a number of days ≥ 0, got {args.older_than:g}", file=sys.stderr)
        return EXIT_USAGE
    dropped = 0
    for key, rec in cache.records():
        m = _measured(rec)
        age = m.age_s() if m is not None else None
        if m is None or (args.older_than is not None and age is not None and age < args.older_than * 86400):
            continue
        cache.forget(key)
        dropped += 1
    print(f"dropped {dropped} measured plan(s) from {cache.path}")
    return EXIT_OK


def _cmd_audit(args) -> int:
    if args.grid:
        failed = 0
        for solver, precision, label, outcome in audit_grid():
            if isinstance(outcome, str):
                continue  # the forced solver does not apply to this size
            status = "host-only" if outcome.host_only else ("ok" if outcome.ok else "FAILED")
            print(f"{solver:<10} {precision:<7} {label:<9} {status:<9} {outcome.tree or ''}")
            if not outcome.ok:
                failed += 1
                print(str(outcome))
        print(f"\n{failed} failing audit(s)")
        return EXIT_OVER_BOUND if failed else EXIT_OK
    if args.shape is None:
        print("error: trnplan audit needs a SHAPE (or --grid)", file=sys.stderr)
        return EXIT_USAGE
    inverse = True if args.kind == "c2r" else args.inverse
    dtype = torch.complex128 if args.precision == "fp64" else torch.complex64
    problem = Problem.create(args.shape, args.batch, kind=args.kind, inverse=inverse, dtype=dtype,
                             precision=args.precision, device="neuron")
    report = audit(problem, strategy=args.strategy, tol=args.tol)
    print(report)
    ok = report.ok
    if xla_audit.available() and report.tree and not report.host_only:
        ok = _xla_audit_tree(problem, report.tree) and ok
    return EXIT_OK if ok else EXIT_OVER_BOUND


def _xla_audit_tree(problem, tree: str) -> bool:
    """Where torch-xla is installed, the same tree lowered on the ``xla`` device and its HLO and
    StableHLO checked (trnplan.tools.xla_audit): what the ATen audit infers, read from the lowering."""
    plan = plan_many(problem.shape, problem.batch, kind=problem.kind, inverse=problem.inverse, dtype=problem.torch_dtype,
                     precision=problem.precision, device="xla", strategy=tree, tol=1.0, compile="eager", cache=None)
    report = xla_audit.audit_plan(plan)
    print(report)
    return report.ok


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    commands = {"plan": _cmd_plan, "solvers": _cmd_solvers, "precompile": _cmd_precompile, "cache": _cmd_cache,
                "calibrate": _cmd_calibrate,
                "bench": benchsuite.main, "audit": _cmd_audit}
    try:
        config.check_environment()
        return commands[args.command](args)
    except (TrnplanError, ValueError, TypeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError as exc:
        print(f"error: out of memory ({exc or 'MemoryError'}); try a smaller --batch or SHAPE", file=sys.stderr)
        return EXIT_FAILURE
    except RuntimeError as exc:  # torch's own failures (a bad device index, a device error)
        print(f"error: {type(exc).__name__}: {str(exc).strip()[:2000]}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
