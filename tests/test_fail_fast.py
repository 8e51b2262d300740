"""Fail fast, leak nothing, take what torch.fft takes (issue 34 items 10-12): absurd sizes are
refused before any search, killed precompiles take their workers with them, settings and
arguments are checked when trnplan starts, with messages that name the problem."""

from __future__ import annotations

import contextlib
import signal

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
