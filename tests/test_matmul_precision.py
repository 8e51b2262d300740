"""The process-wide fp32 matmul precision: plans hold it at what they need, and give it back.

torch keeps one fp32-matmul precision per backend for the whole process (cuBLAS: TF32 or not;
oneDNN on the CPU: bf16/TF32 or not), and users set it (``torch.set_float32_matmul_precision
("high")``). An fp32 plan must compute its GEMMs in full fp32 whatever it is, a tf32 plan in TF32,
and the user's setting must come back exactly, also with threads (kernels/gemm.py,
``_Fp32MatmulPrecision``). The cuBLAS flag can be read and set without a GPU, so all of this runs
here; what TF32 does to a GEMM on a GPU is in tests/test_cuda.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch
from support import BAR, random_complex, reference, rel_l2

import trnplan
from trnplan.kernels import gemm

NEW_API = hasattr(torch._C, "_get_fp32_precision_getter")
needs_new_api = pytest.mark.skipif(not NEW_API, reason="this torch has no per-backend fp32_precision API")


def precision(backend: str) -> str:
    return torch._C._get_fp32_precision_getter(backend, "matmul")


@pytest.fixture
def user_setting():
    """Set the process-wide precisions as a user would; restored after (the new API round-trips exactly)."""
    saved = {b: precision(b) for b in ("cuda", "mkldnn")}

    def set_(backend: str, value: str):
        torch._C._set_fp32_precision_setter(backend, "matmul", value)

    yield set_
    for backend, value in saved.items():
        set_(backend, value)


# the ways a user turns TF32 on (or off) before calling trnplan; each in a fresh process, since
# torch refuses some mixes of its legacy and new APIs for the rest of the process
USER_SETUPS = {
    "default": "",
    "legacy allow_tf32": "torch.backends.cuda.matmul.allow_tf32 = True",
    "set_float32_matmul_precision high": "torch.set_float32_matmul_precision('high')",
    "new api tf32": "torch.backends.cuda.matmul.fp32_precision = 'tf32'",
    "new api ieee": "torch.backends.cuda.matmul.fp32_precision = 'ieee'",
}

#: one new interpreter imports torch and the scopes, then forks a child per user setup: each child
#: starts from torch's untouched settings (the parent sets none), as a new process does, without an
#: interpreter start and torch import per setup (~2.5 s each on the quiet machine, 7-11 s loaded)
_SCOPES_CHILD = textwrap.dedent("""
    import json, os, sys, traceback
    import torch
    from trnplan.kernels.gemm import fp32_matmul_scope, tf32_scope

    def state():
        try:
            legacy = torch.backends.cuda.matmul.allow_tf32
        except RuntimeError:
            legacy = "refused"
        return (torch._C._get_fp32_precision_getter("cuda", "matmul"), legacy)

    def check(setup):
        exec(setup)
        before = state()
        with tf32_scope():
            assert torch._C._get_fp32_precision_getter("cuda", "matmul") == "tf32"
        assert state() == before, (state(), before)
        with fp32_matmul_scope("cuda"):
            assert torch._C._get_fp32_precision_getter("cuda", "matmul") in ("ieee", "none")
        assert state() == before, (state(), before)
        return f"ok {before}"

    got = {}
    for name, setup in json.loads(sys.argv[1]).items():
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: a process whose torch no setup has touched
            os.close(read)
            try:
                msg = check(setup)
            except BaseException:
                msg = traceback.format_exc()
            os.write(write, msg.encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as f:
            got[name] = f.read()
        _, status = os.waitpid(pid, 0)
        got[name] += "" if status == 0 else f" (child exit status {status})"
    print(json.dumps(got))
""")

#: the tests of the module-scoped `scopes_in_fresh_processes` fixture, on one pytest-xdist worker
#: (`make test` runs --dist loadgroup), so that it runs once
ONE_WORKER = pytest.mark.xdist_group("matmul_user_setups")


@pytest.fixture(scope="module")
def scopes_in_fresh_processes():
    """{setup name: "ok (state before)" or the failure} for every :data:`USER_SETUPS`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _SCOPES_CHILD, json.dumps(USER_SETUPS)], capture_output=True,
                          text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@ONE_WORKER
@pytest.mark.slow
@needs_new_api
@pytest.mark.parametrize("name", USER_SETUPS)
def test_tf32_and_fp32_scopes_hold_and_restore_whatever_api_the_user_set(scopes_in_fresh_processes, name):
    """Before this, tf32 mode read the legacy ``allow_tf32`` flag, which raises a RuntimeError once
    the new API has enabled TF32 (measured on torch 2.13): every tf32 plan failed for such a user."""
    got = scopes_in_fresh_processes[name]
    assert got.startswith("ok "), got


@needs_new_api
@pytest.mark.parametrize("strategy,n", [("(dft-gemm)", 64), ("(four-step 4096=64x64 (dft-gemm) (dft-gemm))", 4096)])
def test_an_fp32_plan_multiplies_in_full_fp32_when_the_user_lowered_it(user_setting, monkeypatch, strategy, n):
    """The user asked oneDNN for bf16 fp32-matmuls (what ``set_float32_matmul_precision("medium")``
    does on a CPU with bf16): every GEMM of an fp32 plan still runs with the flag at full fp32, and
    the user's value is back after execute. (This CPU has no bf16 GEMMs, so the flag is what can be
    checked here, not the rounding it would cause.)"""
    user_setting("mkldnn", "bf16")
    seen = []
    for name in ("mm", "bmm"):
        real = getattr(torch, name)

        def recording(*args, _real=real, **kwargs):
            seen.append(precision("mkldnn"))
            return _real(*args, **kwargs)

        monkeypatch.setattr(torch, name, recording)
    plan = trnplan.plan_many(n, batch=4, strategy=strategy, cache=None)
    x = random_complex((4, n), seed=0)
    y = plan.execute(torch.from_numpy(x).to(torch.complex64))
    assert seen and set(seen) == {"ieee"}, seen
    assert precision("mkldnn") == "bf16"
    assert rel_l2(y.numpy(), reference(x, False)) <= BAR["fp32"]


@needs_new_api
def test_threads_share_a_value_and_never_see_another(user_setting):
    """Four threads, each alternating full-fp32 and TF32 blocks on the cuBLAS flag: inside a block
    the flag is always that block's value, and the user's value is back at the end."""
    user_setting("cuda", "tf32")
    wrong = []

    def work(k: int):
        for i in range(300):
            want = "tf32" if (i + k) % 3 == 0 else "ieee"
            with gemm.fp32_matmul_scope("cuda", want):
                time.sleep(0.0001)  # let the other threads in while this block holds the flag
                got = precision("cuda")
                if got != want:
                    wrong.append((want, got))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong, wrong[:5]
    assert precision("cuda") == "tf32"


def test_another_value_nested_in_one_thread_is_an_error_not_a_deadlock():
    with gemm.fp32_matmul_scope("cuda", "ieee"):
        with gemm.fp32_matmul_scope("cuda", "ieee"):  # the same value nests
            pass
        with pytest.raises(RuntimeError, match="'tf32' asked for inside a block that holds 'ieee'"):  # noqa: SIM117
            with gemm.fp32_matmul_scope("cuda", "tf32"):  # the raise is in entering this block
                pass
    with gemm.fp32_matmul_scope("cuda", "tf32"):  # nothing left held
        pass
