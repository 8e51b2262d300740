"""trnplan.tune_malloc: glibc's malloc thresholds fixed on the user's request, so that a plan's
multi-MB outputs stop page-faulting on first touch. Counted in minor faults (a count, not a time)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from support import BAR

import trnplan
from trnplan.core.errors import InvalidArgument, NotSupportedYet
from trnplan.kernels.hostlib import memory

CHILD = textwrap.dedent("""
    import json, resource, sys
    import numpy as np, torch
    import trnplan
    sys.path.insert(0, "tests")
    from support import random_complex, reference, rel_l2
    torch.set_num_threads(1)
    x = random_complex((4096, 192), seed=3).astype(np.complex64)
    plan = trnplan.plan_many((192,), batch=4096)

    def faults(calls=20):
        for _ in range(3):
            plan.execute(torch.from_numpy(x))
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(calls):
            y = plan.execute(torch.from_numpy(x))
            del y
        return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / calls

    before = faults()
    trnplan.tune_malloc()
    settling = faults()  # the heap grows to the working set: 0-460 faults a call over these, by the process
    after = faults()
    err = rel_l2(plan.execute(torch.from_numpy(x)), reference(x.astype(np.complex128), False))
    print(json.dumps({"before": before, "settling": settling, "after": after, "error": err}))
""")


@pytest.mark.skipif(memory._libc() is None, reason="needs Linux with glibc")
def test_a_faulting_process_stops_faulting_after_tune_malloc():
    """A process whose glibc maps every block over 128 KiB afresh and trims at once (the state some
    processes reach by their history of frees, forced here by glibc's own variables): a 6.3 MB
    output faults ~1 540 times a call (one per 4 KiB); after tune_malloc() the outputs reuse the
    heap once it has grown to the working set (over the first ~20 calls some processes still
    faulted 77-460 times a call, others none; over the next 20, none in 18 of 18 processes), and
    the result is unchanged within the fp32 bar."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072", MALLOC_TRIM_THRESHOLD_="0", PYTHONPATH=".")
    out = subprocess.run([sys.executable, "-c", CHILD], check=False, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["before"] > 1000  # the state the test means to be in: every output faults
    assert got["after"] < got["before"] / 20
    assert got["error"] <= BAR["fp32"]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"mmap_threshold": -1}, r"mmap_threshold must be an int ≥ 0 \(bytes\), got -1"),
    ({"trim_threshold": 1.5}, r"trim_threshold must be an int ≥ 0 \(bytes\), got 1.5"),
    ({"trim_threshold": True}, r"trim_threshold must be an int ≥ 0 \(bytes\), got True"),
    ({"mmap_threshold": (32 << 20) + 1}, r"mmap_threshold 33554433 is over glibc's limit 33554432"),
])
def test_bad_thresholds_are_refused_before_anything_changes(kwargs, match, monkeypatch):
    monkeypatch.setattr(memory, "_libc", lambda: pytest.fail("glibc reached with a bad argument"))
    with pytest.raises(InvalidArgument, match=match):
        trnplan.tune_malloc(**kwargs)


def test_without_glibc_it_says_so_and_changes_nothing(monkeypatch):
    monkeypatch.setattr(memory, "_libc", lambda: None)
    with pytest.raises(NotSupportedYet, match=r"tune_malloc needs Linux with glibc \(mallopt\(3\)\).*nothing was changed"):
        trnplan.tune_malloc()


def test_a_threshold_glibc_refuses_is_an_error(monkeypatch):
    class Libc:
        def __init__(self):
            self.calls = []

        def mallopt(self, param, value):
            self.calls.append((param.value, value.value))
            return 0 if param.value == memory.M_TRIM_THRESHOLD else 1

    libc = Libc()
    monkeypatch.setattr(memory, "_libc", lambda: libc)
    with pytest.raises(InvalidArgument, match=r"glibc refused mallopt\(M_TRIM_THRESHOLD, 1024\)"):
        trnplan.tune_malloc(4096, 1024)
    assert libc.calls == [(memory.M_MMAP_THRESHOLD, 4096), (memory.M_TRIM_THRESHOLD, 1024)]
