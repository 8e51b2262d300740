"""Fail fast, leak nothing, take what torch.fft takes (issue 34 items 10-12): absurd sizes are
refused before any search, killed precompiles take their workers with them, settings and
arguments are checked when trnplan starts, with messages that name the problem."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

import trnplan
from trnplan.core import problem as problem_module
from trnplan.core.errors import PlanningError
from trnplan.core.problem import Problem, check_fits

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
