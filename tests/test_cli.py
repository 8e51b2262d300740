"""The ``trnplan`` command line: exit codes, what it prints, and its verify bound.

Exit codes (trnplan.tools.cli): 0 ok, 1 verified error over the plan's bound, 2 usage or planning
error (message on stderr starting with "error:"), 3 a failure while running (tests/test_fail_fast.py);
argparse's own usage errors exit 2 through SystemExit.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import trnplan
import trnplan.tools.cli
from trnplan.tools.cli import EXIT_USAGE, main

PLAN_OPTIONS = ["--batch", "--kind", "--inverse", "--precision", "--norm", "--device", "--strategy", "--tol",
                "--explain", "--verify", "--repeats", "--seed", "--compile", "--cache-dir", "--no-cache",
                "--wisdom-only", "--effort", "--dtype", "--cores"]
VERIFY = re.compile(r"^verify:  relative L2 error (\S+) vs numpy\.fft complex128; bound (\S+); predicted ≤ (\S+) -> "
                    r"(OK|OVER THE BOUND)$", re.MULTILINE)
EXECUTE = re.compile(r"^execute: median [0-9.]+ µs over (\d+) runs \(predicted [0-9.]+ µs\)$", re.MULTILINE)


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def verify_line(out):
    m = VERIFY.search(out)
    assert m, f"no verify line in:\n{out}"
    err, bound, predicted, verdict = m.groups()
    return float(err), float(bound), float(predicted), verdict


# ---------------------------------------------------------------------------- plan
def test_plan_explain_verify(capsys):
    code, out, err = run_cli(capsys, "plan", "4096", "--batch", "4", "--explain", "--verify")
    assert code == 0, err
    assert err == ""
    tree = str(trnplan.plan_many(4096, batch=4).tree)  # the same problem, planned here
    assert f"  tree       {tree}" in out
    assert "trnplan plan — c2c forward (4096,) × batch 4, complex64 fp32, norm backward, cpu" in out
    for section in ("plan tree (each line:", "candidates at the top level"):
        assert section in out
    for name in trnplan.solver_names():  # every solver's verdict is listed
        assert re.search(rf"^  {re.escape(name)}\s", out, re.MULTILINE), name
    m = EXECUTE.search(out)
    assert m and m.group(1) == "20"  # default repeats
    rel, bound, _predicted, verdict = verify_line(out)
    assert bound == 5e-7 and verdict == "OK"
    assert 0 < rel <= 5e-7  # the engine's fp32 bar (u = 6e-8; an exact 0 would mean no comparison)


def test_plan_fp64_verify(capsys):
    code, out, err = run_cli(capsys, "plan", "1000", "--precision", "fp64", "--verify", "--repeats", "2")
    assert code == 0, err
    assert "plan: c2c forward (1000,) × batch 1, complex128 fp64, norm backward, cpu" in out
    assert re.search(r"^tree: \(\S+ 1000", out, re.MULTILINE)
    rel, bound, _, verdict = verify_line(out)
    assert bound == 1e-13 and verdict == "OK" and 0 < rel <= 1e-13


def test_plan_inverse_ortho_verify(capsys):
    code, out, err = run_cli(capsys, "plan", "1000", "--inverse", "--norm", "ortho", "--verify", "--repeats", "2")
    assert code == 0, err
    assert "c2c inverse (1000,) × batch 1, complex64 fp32, norm ortho, cpu" in out
    assert re.search(r"^tree: \(\S+ 1000 .*inv", out, re.MULTILINE)
    rel, bound, _, verdict = verify_line(out)
    assert verdict == "OK" and 0 < rel <= bound == 5e-7


@pytest.mark.parametrize("norm", ["backward", "forward"])
def test_plan_inverse_with_other_norms_verifies(capsys, norm):
    code, out, _ = run_cli(capsys, "plan", "97", "--inverse", "--norm", norm, "--batch", "3", "--verify",
                           "--repeats", "1", "--seed", "5")
    assert code == 0
    assert verify_line(out)[3] == "OK"


def test_plan_without_verify_prints_no_verify_line(capsys):
    code, out, _ = run_cli(capsys, "plan", "64", "--repeats", "3")
    assert code == 0
    assert "verify:" not in out and EXECUTE.search(out).group(1) == "3"


@pytest.mark.parametrize("strategy,tree", [
    ("stockham", "(stockham 1024=8x8x4x4)"),
    ("butterfly", "(butterfly 1024)"),
    ("(stockham 1024=2x8x8x8)", "(stockham 1024=2x8x8x8)"),
    ("(four-step 1024=32x32 (dft-gemm) (stockham))", "(four-step 1024=32x32 (dft-gemm 32) (stockham 32=8x4))"),
])
def test_plan_forced_strategy(capsys, strategy, tree):
    code, out, err = run_cli(capsys, "plan", "1024", "--batch", "2", "--strategy", strategy, "--verify", "--repeats", "2")
    assert code == 0, err
    assert f"\ntree: {tree}\n" in out
    assert verify_line(out)[3] == "OK"


def test_plan_printed_tree_replays(capsys):
    """The tree the CLI prints, handed back as --strategy, gives the same tree."""
    code, out, _ = run_cli(capsys, "plan", "4097", "--strategy", "bluestein", "--repeats", "1")
    assert code == 0
    tree = re.search(r"^tree: (.+)$", out, re.MULTILINE).group(1)
    assert tree.startswith("(bluestein 4097 m=")
    code, out, _ = run_cli(capsys, "plan", "4097", "--strategy", tree, "--verify", "--repeats", "1")
    assert code == 0
    assert f"\ntree: {tree}\n" in out and verify_line(out)[3] == "OK"


def test_plan_strategy_explain_says_forced(capsys):
    code, out, _ = run_cli(capsys, "plan", "256", "--strategy", "(four-step 256=16x16 (dft-gemm) (dft-gemm))",
                           "--explain", "--repeats", "1")
    assert code == 0
    forced = re.search(r", strategy forced: (.+)$", out, re.MULTILINE).group(1)
    assert forced.startswith("(four-step 256=16x16 ")  # the parsed spec, normalised
    tree = "(four-step 256=16x16 (dft-gemm 16) (dft-gemm 16))"
    assert f"  tree       {tree}\n" in out
    assert str(trnplan.plan_many(256, strategy=forced).tree) == tree  # and it reads back as the same strategy


@pytest.mark.parametrize("argv", [["plan", "8x6", "--kind", "r2c"], ["plan", "8x7", "--kind", "c2r", "--batch", "3"],
                                  ["plan", "4x5x6", "--precision", "fp64"], ["plan", "30", "--kind", "c2r"]])
def test_plan_real_and_nd_verify(capsys, argv):
    """--kind and N-D shapes: the CLI's verify uses rfftn / irfftn / fftn in complex128."""
    code, out, err = run_cli(capsys, *argv, "--verify", "--repeats", "2")
    assert code == 0, err
    err_value, bound, _pred, verdict = VERIFY.search(out).groups()
    assert verdict == "OK" and float(err_value) <= float(bound)


# ---------------------------------------------------------------------------- errors → exit 2
@pytest.mark.parametrize("argv,message", [
    (["plan", "97", "--strategy", "stockham"],
     (r"^error: strategy 'stockham' does not apply to the sub-problem n=97 .*stockham: n=97 is not a power of two\. "
     r"Solvers that apply here: native, (scipy, )?(pyfftw, )?(mkl-fft, )?dft-gemm, bluestein$")),
    (["plan", "97", "--strategy", "(four-step 97=8x12)"],
     r"^error: strategy '\(four-step 97=8x12\)' does not apply .*four-step: n=97 is not composite"),
    (["plan", "256", "--strategy", "(stockham 256"], r"^error: strategy '\(stockham 256': unbalanced parentheses$"),
    (["plan", "256", "--strategy", "fftw"], r"^error: strategy 'fftw': unknown solver 'fftw'; known solvers: "),
    (["plan", "64", "--batch", "0"], r"^error: --batch and --repeats must be positive$"),
    (["plan", "64", "--repeats", "0"], r"^error: --batch and --repeats must be positive$"),
    (["plan", "64", "--kind", "r2c", "--inverse"],
     r"^error: --inverse is implied by --kind c2r and impossible for r2c; drop it$"),
    (["plan", "64", "--device", "neuron"], r"^error: device='neuron' "),
    (["plan", "64", "--device", "tpu"], r"^error: device must be one of 'cpu', 'cuda', 'neuron'"),
    (["plan", "64", "--tol", "-1"], r"^error: tol must be a positive float \(a relative L2 error bound\), got -1\.0$"),
    (["plan", "2", "--tol", "1e-30", "--verify"],
     (r"^error: tol=1\.0e-30 is out of reach for precision='fp32' at n=2: .*native: predicted error \S+ exceeds "
     r"the bound 1e-30; ")),
], ids=["not-applicable", "not-composite", "unbalanced", "unknown-solver", "batch-0", "repeats-0", "r2c-inverse",
        "neuron", "bad-device", "negative-tol", "tol-nothing-meets"])
def test_plan_error_exits_2(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert out == ""
    assert re.search(message, err.strip(), re.DOTALL), err


def test_tol_below_any_prediction_is_a_planning_error_not_a_verify_failure(capsys):
    """--tol is the bound every candidate must be *predicted* to meet, so a bound no solver can
    meet stops at planning (exit 2, nothing run) rather than running and failing verify (exit 1)."""
    code, out, err = run_cli(capsys, "plan", "64", "--tol", "1e-30", "--verify")
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "exceeds the bound 1e-30" in err


def test_verify_over_the_bound_exits_1(capsys, monkeypatch):
    """A plan whose measured error is over its bound: exit 1 and 'OVER THE BOUND'. The planner never
    builds such a plan on purpose (its bound is a prediction that measurements stay under), so the
    plan's bound is lowered after planning, on a copy (the cached plan is untouched)."""
    real_plan_many = trnplan.tools.cli.plan_many

    def plan_with_tiny_bound(*args, **kwargs):
        plan = copy.copy(real_plan_many(*args, **kwargs))
        plan.tol = 1e-30
        return plan

    monkeypatch.setattr(trnplan.tools.cli, "plan_many", plan_with_tiny_bound)
    code, out, err = run_cli(capsys, "plan", "64", "--verify", "--repeats", "1")
    assert code == 1, err
    rel, bound, _, verdict = verify_line(out)
    assert verdict == "OVER THE BOUND" and bound == 1e-30 and rel > bound
    assert trnplan.plan_many(64).tol == 5e-7


@pytest.mark.parametrize("shape", ["abc", "0", "64x0", "4096.5", "", "x"])
def test_bad_shape_is_an_argparse_error(capsys, shape):
    with pytest.raises(SystemExit) as info:
        main(["plan", shape])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "usage: trnplan plan" in err
    assert re.search(r"argument SHAPE: SHAPE (must be lengths like 4096 or 64x64|lengths must be positive), got "
                     + re.escape(repr(shape)), err), err


@pytest.mark.parametrize("argv,needle", [
    ([], "the following arguments are required: COMMAND"),
    (["fft", "64"], "invalid choice: 'fft'"),
    (["plan"], "the following arguments are required: SHAPE"),
    (["plan", "64", "--precision", "fp16"], "argument --precision: invalid choice: 'fp16'"),
    (["plan", "64", "--norm", "none"], "argument --norm: invalid choice: 'none'"),
    (["plan", "64", "--batch", "two"], "argument --batch: invalid int value: 'two'"),
    (["plan", "64", "--tol", "tiny"], "argument --tol: invalid float value: 'tiny'"),
    (["plan", "64", "--frobnicate"], "unrecognized arguments: --frobnicate"),
], ids=["no-command", "unknown-command", "no-shape", "precision", "norm", "batch", "tol", "unknown-option"])
def test_usage_errors_exit_2(capsys, argv, needle):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert needle in capsys.readouterr().err


# ---------------------------------------------------------------------------- solvers, help, version
def test_solvers_lists_every_solver_in_planner_order(capsys):
    code, out, _ = run_cli(capsys, "solvers")
    assert code == 0
    lines = out.strip().splitlines()
    assert [line.split()[0] for line in lines] == list(trnplan.solver_names())
    for line in lines:
        assert re.match(r"^\S+\s+v\d+\s+(leaf|composite)\s+\S", line), line
    kinds = {line.split()[0]: line.split()[2] for line in lines}
    assert kinds["four-step"] == kinds["bluestein"] == "composite" and kinds["stockham"] == "leaf"


def test_help_mentions_every_command(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "usage: trnplan" in out and "plan" in out and "solvers" in out and "--version" in out
    assert "precompile" in out and "cache" in out


def test_plan_help_mentions_every_option(capsys):
    with pytest.raises(SystemExit) as info:
        main(["plan", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for option in PLAN_OPTIONS:
        assert option in out, option
    unwrapped = re.sub(r"-\n\s+", "-", out)  # argparse may wrap a name at its hyphen ("dft-\n gemm")
    for name in trnplan.solver_names():  # --strategy's help names the solvers it can force
        assert name in unwrapped, name
    # and the list above is complete: every option the parser defines is in it
    plan_parser = trnplan.tools.cli.build_parser()._subparsers._group_actions[0].choices["plan"]
    defined = {s for a in plan_parser._actions for s in a.option_strings if s.startswith("--") and s != "--help"}
    assert defined == set(PLAN_OPTIONS)


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"trnplan {trnplan.__version__}"


# ---------------------------------------------------------------------------- as a process
def _env():
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the installed package, not a path hack
    return env


@pytest.mark.slow
def test_python_dash_m_trnplan(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "trnplan", "plan", "64", "--verify", "--repeats", "2"],
                          check=False, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert VERIFY.search(proc.stdout).group(4) == "OK"


@pytest.mark.slow
def test_console_script(tmp_path):
    script = Path(sys.executable).with_name("trnplan")
    if not script.exists():
        script = shutil.which("trnplan")
    if script is None:
        pytest.skip("the trnplan console script is not installed next to this interpreter")
    proc = subprocess.run([str(script), "plan", "97", "--strategy", "stockham"],
                          check=False, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=_env())
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("error: strategy 'stockham' does not apply")


def test_cache_list_measured_shows_age_noise_and_drop_forgets(capsys, tmp_path):
    """`trnplan cache list --measured` lists only measured plans, with their age, noise and ratio
    to the default; `drop --measured --older-than DAYS` forgets the old ones, `drop --measured` all."""
    from trnplan.cache import PlanCache
    from trnplan.planner.measure import Measurement

    cache = PlanCache(tmp_path)
    old = trnplan.plan_many(128, batch=2, effort="measure", cache=cache)
    trnplan.plan_many(64, batch=2, cache=cache)  # an estimate: never listed as measured, never dropped
    new = trnplan.plan_many(256, batch=2, effort="measure", cache=cache)
    key = old.provenance.wisdom_key
    rec = cache.get_wisdom(key)
    m = Measurement.from_dict(rec["measurement"])
    cache.update_wisdom(key, {**rec, "measurement": {**m.to_dict(), "measured_at": time.time() - 10 * 86400}})
    code, out, _ = run_cli(capsys, "cache", "list", "--measured", "--cache-dir", str(tmp_path))
    lines = out.strip().splitlines()
    assert code == 0 and len(lines) == 2 and all("measure, " in ln and "noise " in ln for ln in lines)
    assert any("10.0 days old" in ln for ln in lines) and any("0.0 days old" in ln for ln in lines)
    assert all("(native" in ln or "default" in ln for ln in lines)
    code, out, _ = run_cli(capsys, "cache", "drop", "--measured", "--older-than", "5", "--cache-dir", str(tmp_path))
    assert code == 0 and "dropped 1 measured plan(s)" in out
    assert cache.get_wisdom(key) is None and cache.get_wisdom(new.provenance.wisdom_key) is not None
    code, out, _ = run_cli(capsys, "cache", "drop", "--measured", "--cache-dir", str(tmp_path))
    assert "dropped 1 measured plan(s)" in out and len(cache.records()) == 1  # the estimate stays
    code, _, err = run_cli(capsys, "cache", "drop", "--cache-dir", str(tmp_path))
    assert code == EXIT_USAGE and "takes --measured" in err


def test_plan_takes_dtype_and_cores(capsys):
    code, out, err = run_cli(capsys, "plan", "256", "--batch", "4", "--dtype", "complex128", "--cores", "2",
                             "--strategy", "multicore", "--verify", "--repeats", "1", "--no-cache")
    assert code == 0, err
    assert "complex128 fp64" in out and "2 cores" in out and "(multicore 256 shards=2" in out
    _rel, bound, _, verdict = verify_line(out)
    assert verdict == "OK" and bound == trnplan.core.accuracy.DEFAULT_TOL["fp64"]


def test_calibrate_fits_and_stores(capsys, tmp_path):
    code, out, err = run_cli(capsys, "calibrate", "--quick", "--seconds", "1", "--cache-dir", str(tmp_path / "c"))
    assert code == 0, err
    assert out.startswith("cost model fit at ") and f"stored in {tmp_path / 'c'}" in out


def test_calibrate_refuses_bad_threads(capsys):
    code, _out, err = run_cli(capsys, "calibrate", "--threads", "two")
    assert code == EXIT_USAGE and "--threads takes counts like 1,2" in err


def _message_strings():
    """Every string literal in trnplan/ that is not a docstring: what users can see (messages, help,
    explain()), as (file, line, text)."""
    import ast

    root = Path(trnplan.__file__).parent
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                yield path.relative_to(root.parent), node.lineno, node.value


def test_every_hint_works_from_the_wheel():
    """A message may tell an installed user to run a `trnplan` subcommand (which must exist), never a
    script or file of the source checkout (bench/, tools/, examples/), which the wheel does not ship."""
    commands = set(trnplan.tools.cli.build_parser()._subparsers._group_actions[0].choices)
    checkout = re.compile(r"python (bench|tools|examples)/|\bexamples/\w+\.(toml|py)")
    # `trnplan X ...`, (trnplan X), (trnplan X ARG ...), (trnplan X --flag ...): how messages quote commands
    hinted = re.compile(r"`trnplan ([a-z-]+)|\(trnplan ([a-z-]+)(?:\)| [A-Z]| --)")
    for path, line, text in _message_strings():
        assert not checkout.search(text), f"{path}:{line}: {text!r}"
        for match in hinted.finditer(text):
            sub = next(g for g in match.groups() if g)
            assert sub in commands, f"{path}:{line}: hints `trnplan {sub}`, which is no command: {text!r}"
