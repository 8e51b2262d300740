"""Fail fast, leak nothing, take what torch.fft takes (issue 34 items 10-12): absurd sizes are
refused before any search, killed precompiles take their workers with them, settings and
arguments are checked when trnplan starts, with messages that name the problem."""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

import trnplan
from trnplan.core import problem as problem_module
from trnplan.core.errors import PlanningError
from trnplan.core.problem import Problem, check_fits
from trnplan.tools.cli import main

# ---------------------------------------------------------------------- item 10: absurd sizes
ABSURD = [((99999999999,), {}), ((65537**2,), {}), ((2**40,), {"precision": "auto"}),
          ((8,), {"strategy": "(bluestein 8 m=99999999999)"})]


@contextlib.contextmanager
def hang_guard(seconds: int):
    """Turn a hang into a failure (SIGALRM; a guard, not a timing assertion)."""
    def interrupt(*_):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_absurd_sizes_are_refused_before_searching():
    """Each of these searched for minutes on the code before issue 34."""
    out = []
    with hang_guard(60):
        for args, kwargs in ABSURD:
            with pytest.raises(PlanningError) as info:
                trnplan.plan_many(*args, **kwargs, cache=None)
            out.append(str(info.value))
    memory = problem_module.host_memory_bytes()
    for text in out[:3]:
        assert "for its input and output alone, more than this machine's" in text
        assert f"{memory / 2**30:.1f} GiB of memory: split the batch or the transform" in text
    assert "(99999999999,)" in out[0] and "1490.1 GiB" in out[0]
    assert "bluestein: its sub-plan failed" in out[3] and "(99999999999,)" in out[3]


@pytest.mark.parametrize("kind,shape,batch,dtype,want", [
    ("c2c", (1024,), 4, "complex64", 4 * 1024 * 2 * 2 * 4),
    ("c2c", (1024,), 4, "complex128", 4 * 1024 * 2 * 2 * 8),
    ("r2c", (1024,), 1, "complex64", (1024 + 2 * 513) * 4),
    ("c2r", (8, 10), 3, "complex64", 3 * (8 * 6 * 2 + 80) * 4),
])
def test_data_bytes_and_the_memory_bound(kind, shape, batch, dtype, want, monkeypatch):
    import torch

    p = Problem.create(shape, batch, kind=kind, inverse=kind == "c2r",
                       dtype=torch.complex128 if dtype == "complex128" else torch.complex64)
    assert p.data_bytes() == want
    check_fits(p, memory=want)  # exactly fits
    with pytest.raises(PlanningError, match=f"needs .* GiB for its input and output alone, more than this "
                                            f"machine's {(want - 1) / 2**30:.1f} GiB"):
        check_fits(p, memory=want - 1)
    # plan_many refuses it before searching, with the machine's memory as the bound
    monkeypatch.setattr(problem_module, "host_memory_bytes", lambda: want - 1)
    with pytest.raises(PlanningError, match="for its input and output alone"):
        trnplan.plan_many(shape, batch, kind=kind, inverse=kind == "c2r", cache=None,
                          dtype=torch.complex128 if dtype == "complex128" else torch.complex64)
    monkeypatch.setattr(problem_module, "host_memory_bytes", lambda: want)
    trnplan.plan_many(shape, batch, kind=kind, inverse=kind == "c2r", cache=None,
                      dtype=torch.complex128 if dtype == "complex128" else torch.complex64)


# ---------------------------------------------------------------------- item 11: no hangs, no leaks
def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    out = []
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    """Running (a zombie nobody reaps, as under a container's PID 1, counts as dead)."""
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killed_precompile_takes_its_workers_with_it(tmp_path, sig):
    """A pool's workers block on a queue whose writing end they hold: they outlived a killed
    `trnplan precompile --jobs 2` forever (issue 34)."""
    manifest = tmp_path / "plans.toml"
    manifest.write_text("".join(f'[[plan]]\nshape = [{n}]\nbatch = 3\neffort = "patient"\n\n'
                                for n in range(200, 260)))
    cache = tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, "-m", "trnplan", "precompile", str(manifest), "--jobs", "2",
                             "--cache-dir", str(cache), "--quiet"],
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 180
        while not (cache / "cache.db").exists():  # a worker is past its initializer, planning
            assert proc.poll() is None and time.monotonic() < deadline, "precompile never started"
            time.sleep(0.2)
        workers += [c for c in _children(proc.pid) if "multiprocessing" in pathlib.Path(
            f"/proc/{c}/cmdline").read_bytes().decode(errors="replace")]
        assert workers, _children(proc.pid)
        proc.send_signal(sig)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 60
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [w for w in workers if _alive(w)], "workers outlived their parent"
    finally:
        if proc.poll() is None:
            proc.kill()
        for w in workers + _children(proc.pid):  # the workers, also when the test failed: never leak them
            if _alive(w):
                with contextlib.suppress(OSError):
                    os.kill(w, signal.SIGKILL)


@pytest.mark.slow
def test_import_resolves_the_cache_dir_lazily(tmp_path):
    code = ("import trnplan\n"
            "print(trnplan.plan_many(8, cache=None).tree)\n"
            "try:\n    trnplan.plan_many(8)\nexcept ValueError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
                              "TRNPLAN_CACHE_DIR": "~nosuchuser/x"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == [
        "(native 8)", ("TRNPLAN_CACHE_DIR '~nosuchuser/x': cannot expand its '~' (Could not determine home "
        "directory.); give the directory as an absolute path")]


# ---------------------------------------------------------------------- item 12: outputs are new tensors
@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_outputs_never_alias_the_inputs(n, norm):
    """The pair form of a (stockham 1) plan returned its input tensors themselves (issue 34)."""
    import torch

    from trnplan.planner import registry

    checked = 0
    for solver in [s.name for s in registry.solvers()]:
        try:
            plan = trnplan.plan_many(n, batch=2, strategy=solver, norm=norm, cache=None)
        except PlanningError:
            continue  # does not apply to this n
        re, im = torch.randn(2, n), torch.randn(2, n)
        before = (re.clone(), im.clone())
        for t in plan.execute((re, im)):
            t.add_(100.0)
        assert torch.equal(re, before[0]) and torch.equal(im, before[1]), f"{plan.tree}: pair form aliases its input"
        x = torch.randn(2, n, dtype=torch.complex64)
        x0 = x.clone()
        plan.execute(x).add_(100.0)
        assert torch.equal(x, x0), f"{plan.tree}: complex form aliases its input"
        checked += 1
    assert checked >= 3


# ---------------------------------------------------------------------- item 12: settings, one rule, at the start
@pytest.mark.parametrize("name,value,message", [
    ("TRNPLAN_PLAN_LRU_SIZE", "1_0", "must be a positive integer"),
    ("TRNPLAN_PLAN_LRU_SIZE", "+5", "must be a positive integer"),
    ("TRNPLAN_MEASURE_TOP_K", "0", "must be a positive integer"),
    ("TRNPLAN_TIMELIMIT", "inf", "must be a positive number of seconds"),
    ("TRNPLAN_TIMELIMIT", "nan", "must be a positive number of seconds"),
    ("TRNPLAN_TIMELIMIT", "1_0", "must be a positive number of seconds"),
    ("TRNPLAN_RECHECK", "yes", "must be 0 or 1"),
    ("TRNPLAN_NEURON_PROBE", "true", "must be 0 or 1"),
    ("TRNPLAN_AOT_LOAD_CHECK", "always", "must be one of auto, 0, 1"),
    ("TRNPLAN_INDUCTOR_MODE", "fast", "must be one of default"),
])
def test_every_setting_is_checked_when_planning_starts(monkeypatch, capsys, name, value, message):
    """Not when its feature first runs: a bad TRNPLAN_TIMELIMIT failed only at the first measured
    plan, a bad TRNPLAN_NEURON_PROBE only on a Neuron device."""
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=re.escape(f"environment variable {name}={value!r} {message}")):
        trnplan.plan_many(16, cache=None)  # an estimate on the CPU: reads none of these itself
    assert main(["solvers"]) == 2
    assert f"error: environment variable {name}={value!r}" in capsys.readouterr().err


def test_check_environment_covers_every_setting_config_reads():
    """A new TRNPLAN_* variable joins config.SETTINGS, or check_environment would not check it."""
    from trnplan.core import config

    source = pathlib.Path(config.__file__).read_text()
    read = set(re.findall(r'"(TRNPLAN_[A-Z0-9_]+)"', source))
    assert read and read == set(config.SETTINGS)


@pytest.mark.parametrize("name,value,want", [
    ("TRNPLAN_PLAN_LRU_SIZE", " 12 ", 12), ("TRNPLAN_MEASURE_TOP_K", "\t3\n", 3), ("TRNPLAN_TIMELIMIT", " 2.5 ", 2.5),
    ("TRNPLAN_TIMELIMIT", "1e1", 10.0), ("TRNPLAN_RECHECK", " 0 ", False), ("TRNPLAN_AOT_LOAD_CHECK", " 1", "1"),
    ("TRNPLAN_WISDOM_ONLY", "   ", False),
])
def test_one_parsing_rule_whitespace_is_ignored(monkeypatch, name, value, want):
    from trnplan.core import config

    monkeypatch.setenv(name, value)
    config.check_environment()
    got = config.timelimit("measure") if name == "TRNPLAN_TIMELIMIT" else config.SETTINGS[name]()
    assert got == want


# ---------------------------------------------------------------------- item 12: arguments
def test_numpy_and_torch_integers_are_lengths_as_in_torch_fft():
    import numpy as np
    import torch

    plan = trnplan.plan_many(np.int64(64), batch=np.int32(2), cores=np.int64(1), cache=None)
    assert plan.problem.shape == (64,) and type(plan.problem.batch) is int
    assert trnplan.plan_many((np.int64(8), torch.tensor(8)), cache=None).problem.shape == (8, 8)
    x = torch.randn(2, 64, dtype=torch.complex64)
    assert torch.equal(plan.execute(x), trnplan.plan_many(64, batch=2, cache=None).execute(x))
    with pytest.raises(ValueError, match="shape must hold positive ints"):
        trnplan.plan_many((np.float64(8),), cache=None)


@pytest.mark.parametrize("kwargs,message", [
    ({"inverse": 1}, "inverse must be True or False, got int: 1"),
    ({"inverse": "yes"}, "inverse must be True or False"),
    ({"precision": ["fp32"]}, r"precision must be a str \(one of its words\), got list"),
    ({"norm": ["ortho"]}, "norm must be a str"),
    ({"kind": ("c2c",)}, "kind must be a str"),
    ({"dtype": ["complex64"]}, r"dtype must be one of 'complex64', 'complex128'; got \['complex64'\]"),
])
def test_argument_type_mistakes_name_the_argument(kwargs, message):
    with pytest.raises((TypeError, ValueError), match=message):
        trnplan.plan_many(64, cache=None, **kwargs)


@pytest.mark.parametrize("body,message", [
    (b'[[plan]]\nshape = [64] # caf\xe9\n', r"is not UTF-8 text \(byte 0xe9 at offset 27\)"),
    (b'[[plan]]\nshape = ["a"]\n', r"\[\[plan\]\] #1: shape must be a positive integer or a non-empty list"),
    (b'[[plan]]\nshape = [[64]]\n', "shape must be a positive integer or a non-empty list"),
    (b'[[plan]]\nshape = []\n', "shape must be a positive integer or a non-empty list"),
    (b'[[plan]]\nshape = [64]\nbatch = 0\n', "batch must be a positive integer, got 0"),
    (b'plan = [1, 2]\n', r"\[\[plan\]\] #1 must be a table of keys, got int"),
])
def test_manifest_mistakes_are_named(tmp_path, body, message):
    from trnplan.tools.precompile import ManifestError, load_manifest

    path = tmp_path / "m.toml"
    path.write_bytes(body)
    with pytest.raises(ManifestError, match=message):
        load_manifest(path)


# ---------------------------------------------------------------------- item 12: the CLI's exit codes
def test_cli_failures_are_one_line_errors_with_their_own_exit_code(capsys, monkeypatch):
    import trnplan.tools.cli

    assert main(["plan", "64", "--device", "meta", "--verify", "--no-cache"]) == 2
    assert "the meta device computes none" in capsys.readouterr().err

    def boom(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(trnplan.tools.cli, "plan_many", boom)
    assert main(["plan", "64", "--no-cache"]) == trnplan.tools.cli.EXIT_FAILURE == 3
    assert capsys.readouterr().err.startswith("error: out of memory")

    def device_error(*args, **kwargs):
        raise RuntimeError("CUDA error: invalid device ordinal")

    monkeypatch.setattr(trnplan.tools.cli, "plan_many", device_error)
    assert main(["plan", "64", "--no-cache"]) == 3
    assert capsys.readouterr().err == "error: RuntimeError: CUDA error: invalid device ordinal\n"


def test_the_docs_settings_table_is_generated_from_config(tmp_path, monkeypatch):
    """tools/check_settings.py (make lint): docs/user-guide.md's table is config.SETTING_DOCS, and it
    refuses a stale table and a doc that names a variable nothing reads."""
    import importlib.util

    from trnplan.core import config

    spec = importlib.util.spec_from_file_location(
        "check_settings", pathlib.Path(__file__).resolve().parent.parent / "tools" / "check_settings.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    assert check.table_problems() == [] and check.name_problems() == []
    guide = tmp_path / "docs" / "user-guide.md"
    guide.parent.mkdir()
    guide.write_text(f"# x\n\n{check.START}| old |\n{check.END}\nsee `TRNPLAN_NO_SUCH_THING`\n")
    monkeypatch.setattr(check, "ROOT", tmp_path)
    monkeypatch.setattr(check, "GUIDE", guide)
    assert any("run python tools/check_settings.py --write" in p for p in check.table_problems())
    assert any("TRNPLAN_NO_SUCH_THING is neither a setting" in p for p in check.name_problems())
    check.write()
    assert check.table_problems() == []
    assert config.settings_table() in guide.read_text()
