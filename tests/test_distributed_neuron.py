"""trnplan.distributed on the ``neuron`` backend: 2 and 4 spawned ranks on TorchNeuron stand-ins.

Each rank installs the ``neuron`` device stand-in (tests/neuron_device_standin.py: PrivateUse1
tensors that refuse complex and float64, and a "neuron" compile backend) and the ``neuron``
process-group stand-in (tests/neuron_pg_standin.py: collectives over gloo that refuse complex,
float64 and int64 buffers, host tensors, send/recv, shared send/receive buffers and replica
groups the documents say the hardware refuses), then calls ``init_process_group("neuron")``.

Checked, against numpy.fft in complex128 at the engine's fp32 bar (``DEFAULT_TOL``, imported), on
the blocks gathered over a separate gloo group: slab 2-D/3-D, pencil (1×2 and 2×2), six-step 1-D,
transposed output, batch, every norm, autograd; that the plans run in split form (no complex
tensor on the device: every collective's buffer is float32, every result and gradient a float32
pair on ``neuron``), that each local transform ran as a compiled graph, one all_to_all_single per
transpose; and the refusals (a complex block, r2c, complex128, send, a complex buffer, an
unaligned group).
"""

from __future__ import annotations

import datetime
import os
import pathlib
import socket
import sys
import time

import numpy as np
import pytest
import torch
import torch.distributed as dist
from support import reference, rel_l2

from trnplan.core.accuracy import DEFAULT_TOL

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo (under the stand-in) is not available")
BAR = DEFAULT_TOL["fp32"]
TESTS = pathlib.Path(__file__).resolve().parent
_JOB_TIMEOUT = 200.0


def _pair_to_host(pair):
    import neuron_device_standin as devsi

    return devsi.to_cpu(pair[0]).numpy() + 1j * devsi.to_cpu(pair[1]).numpy()


def _gather(plan, y: np.ndarray, gloo, slices=None) -> np.ndarray:
    """The global array (batch, *global) of every rank's block (its output block unless ``slices``)."""
    blocks = [None] * dist.get_world_size()
    dist.all_gather_object(blocks, (plan.local_out_slices if slices is None else slices, y), group=gloo)
    gshape = [max(s.stop for s in col) for col in zip(*(b[0] for b in blocks))]
    out = np.zeros((y.shape[0], *gshape), dtype=np.complex128)
    for where, block in blocks:
        out[(slice(None), *where)] = block
    return out


def _natural(plan, arr, transposed: bool):
    if plan.problem.rank == 1 and transposed:  # D[k1, k2] = x[k1 + n1·k2]
        n1, n2 = plan.factors
        return arr.reshape(arr.shape[0], n2, n1).swapaxes(-1, -2)
    return arr


def _split_input(plan, x, kind):
    import neuron_device_standin as devsi

    xl = np.ascontiguousarray(x[(slice(None), *plan.local_slices)])
    if kind == "r2c":
        return (devsi.to_neuron(torch.from_numpy(xl).float()),)
    return tuple(devsi.to_neuron(torch.from_numpy(np.ascontiguousarray(f(xl))).float()) for f in (np.real, np.imag))


def _host(outs) -> np.ndarray:
    import neuron_device_standin as devsi

    parts = [devsi.to_cpu(t).numpy().astype(np.float64) for t in outs]
    return parts[0] if len(parts) == 1 else parts[0] + 1j * parts[1]


def _adjoint_reference(kind, inverse, norm, shape, w):
    """The gradient of Re Σ conj(w)·y for y = the transform of x, by torch.fft's autograd in complex128."""
    dims = tuple(range(1, 1 + len(shape)))
    if kind == "c2c":  # Fᴴ w = conj(F conj(w))
        fwd = np.fft.ifftn if inverse else np.fft.fftn
        return np.conj(fwd(np.conj(w), axes=dims, norm=norm))
    x_shape = (w.shape[0], *shape) if kind == "r2c" else (w.shape[0], *shape[:-1], shape[-1] // 2 + 1)
    xt = torch.zeros(x_shape, dtype=torch.float64 if kind == "r2c" else torch.complex128, requires_grad=True)
    y = torch.fft.rfftn(xt, dim=dims, norm=norm) if kind == "r2c" else torch.fft.irfftn(xt, s=shape, dim=dims, norm=norm)
    wt = torch.from_numpy(np.ascontiguousarray(w.real) if kind == "c2r" else w)  # _gather's arrays are complex
    loss = (y * wt.conj()).real.sum() if kind == "r2c" else (y * wt).sum()
    loss.backward()
    return xt.grad.numpy()


def _run(shape, gloo, *, kind="c2c", inverse=False, norm="backward", layout="slab", transposed_output=False,
         batch=1, grad=False, seed=0):
    """Plan, run on the stand-in device, compare with numpy; audit the device ops and collectives."""
    import neuron_device_standin as devsi
    import neuron_pg_standin as pgsi

    import trnplan.distributed as td

    plan = td.plan_many(shape, batch, kind=kind, inverse=inverse if kind == "c2c" else None, norm=norm, layout=layout,
                        transposed_output=transposed_output)
    assert plan.split and str(plan.device) == "neuron", plan.device
    g = np.random.default_rng(seed)
    p = plan.problem
    x = g.standard_normal((batch, *p.in_shape)) + (0 if kind == "r2c" else 1j * g.standard_normal((batch, *p.in_shape)))
    if kind == "c2r":  # a Hermitian-consistent half spectrum, so irfftn is the exact inverse
        x = np.fft.rfftn(g.standard_normal((batch, *shape)), axes=tuple(range(1, 1 + len(shape))))
    xs = _split_input(plan, x, kind)
    for t in xs:
        t.requires_grad_(grad)
    devsi.OPS.clear()
    pgsi.CALLS.clear()
    graphs = len(devsi.GRAPHS)
    out = plan.execute(xs if len(xs) == 2 else xs[0])
    outs = out if isinstance(out, tuple) else (out,)
    assert len(outs) == (1 if kind == "c2r" else 2)
    assert all((str(t.device), t.dtype) == ("neuron:0", torch.float32) for t in outs)
    dtypes = {d for _, ds, _ in devsi.OPS for d in ds}
    assert not dtypes & {torch.complex64, torch.complex128, torch.float64}, dtypes  # no complex on the device
    transposes = sum(1 for s in plan._steps if type(s).__name__ == "_Transpose" and s.qsize > 1)
    assert [c[0] for c in pgsi.CALLS] == ["all_to_all_single"] * transposes, pgsi.CALLS
    assert {c[1] for c in pgsi.CALLS} <= {"torch.float32"}, pgsi.CALLS
    stages = sum(1 for s in plan._steps if type(s).__name__ == "_Stage" and s.plan is not None)
    assert len(devsi.GRAPHS) - graphs <= stages  # compiled whole per (plan, shape): the first call compiles
    assert all(s.plan.provenance.compile_mode != "eager" for s in plan._steps
               if type(s).__name__ == "_Stage" and s.plan is not None)
    ref = _natural(plan, reference(x, inverse, norm, kind=kind, shape=shape), transposed_output)
    err = rel_l2(_gather(plan, _host(outs), gloo), ref)
    assert err <= BAR, (shape, kind, layout, inverse, norm, err)
    if grad:
        gw = np.random.default_rng(100 + dist.get_rank())  # each rank its own weights (a shared draw repeats)
        w = gw.standard_normal(outs[0].shape) + (0 if kind == "c2r" else 1j * gw.standard_normal(outs[0].shape))
        ws = tuple(devsi.to_neuron(torch.from_numpy(np.ascontiguousarray(f(w))).float())
                   for f in ((np.real,) if kind == "c2r" else (np.real, np.imag)))
        torch.autograd.backward(outs, ws)
        assert all(str(t.grad.device) == "neuron:0" and t.grad.dtype == torch.float32 for t in xs)
        wg = _gather(plan, w, gloo)  # the global weights
        gref = _adjoint_reference(kind, inverse, norm, shape, wg)
        gerr = rel_l2(_gather(plan, _host([t.grad for t in xs]), gloo, plan.local_slices), gref)
        assert gerr <= BAR, (shape, kind, layout, "grad", gerr)
    return plan


def _refused(exc_type, match, fn):
    with pytest.raises(exc_type, match=match):
        fn()


def _job_two(rank, world, gloo):
    import neuron_device_standin as devsi
    import neuron_pg_standin as pgsi

    import trnplan.distributed as td
    from trnplan.core.errors import NotSupportedYet

    _run((8, 12), gloo, grad=True)
    _run((8, 6, 10), gloo, inverse=True, norm="ortho", batch=2)
    _run((8, 6, 10), gloo, layout="pencil", norm="forward", grad=True)
    _run((8, 12), gloo, transposed_output=True)
    _run((8, 12), gloo, kind="r2c", grad=True)  # real block in, pair out
    _run((8, 12), gloo, kind="r2c", transposed_output=True, grad=True)  # the half axis split over the ranks
    _run((8, 6, 9), gloo, kind="c2r", norm="forward", grad=True)  # pair in, real block out
    plan = _run((96,), gloo, inverse=True, grad=True)  # six-step: the twiddle in split form
    assert plan.factors in ((8, 12), (12, 8))
    text = td.plan_many((8, 12)).explain()
    assert "split (re, im)" in text and "neuron" in text
    # the exchanges priced with the documented trn1 figures (TorchNeuron's trn2 has none published)
    assert "priced as trn1.32xlarge" in text and text.count("all_to_all_single (whole group, 2 ranks)") == 2
    # refusals: the split form names the pair; kinds and dtypes not built name the way out
    plan = td.plan_many((8, 12))
    z = torch.zeros(plan.local_shape, dtype=torch.float32)
    _refused(TypeError, "split form", lambda: plan.execute(devsi.to_neuron(z)))
    _refused(NotSupportedYet, "1-D", lambda: td.plan_many(64, kind="r2c"))
    _refused(ValueError, "no FP64", lambda: td.plan_many((8, 12), dtype=torch.complex128))
    # the process-group stand-in refuses what the hardware refuses
    _refused(pgsi.NeuronCollectiveRefused, "send/recv", lambda: dist.send(devsi.to_neuron(z), 1 - rank))
    # torch's all_to_all_single hands a complex tensor to the backend as its real view, so the
    # backend's own rule is checked on the process group itself
    pg = dist.distributed_c10d._get_default_group()
    c, c_out = (devsi.NeuronTensor(torch.zeros(4, dtype=torch.complex64)) for _ in range(2))  # wrapped: no op runs
    _refused(pgsi.NeuronCollectiveRefused, "complex64", lambda: pg.alltoall_base(c_out, c, [], []))
    _refused(pgsi.NeuronCollectiveRefused, "neuron tensors",
             lambda: dist.all_to_all_single(torch.empty(4), torch.zeros(4)))


def _job_four(rank, world, gloo):
    import neuron_device_standin as devsi
    import neuron_pg_standin as pgsi

    _run((8, 6, 10), gloo, grad=True)
    plan = _run((8, 6, 10), gloo, layout="pencil", inverse=True, batch=2, grad=True)
    assert plan.grid == (2, 2)  # column groups {0, 2}, {1, 3}: strided, inside one chip
    _run((6, 8), gloo)  # uneven slab blocks: 2, 2, 1, 1
    _run((7, 5, 9), gloo, kind="r2c", layout="pencil", grad=True)  # uneven on every axis
    _run((96,), gloo, transposed_output=True)  # six-step, 96 = 8×12 over 4 ranks
    # a group of ranks 1, 2: contiguous but not aligned to its size
    pair = dist.new_group([1, 2])
    if rank in (1, 2):
        t = devsi.to_neuron(torch.zeros(2))
        _refused(pgsi.NeuronCollectiveRefused, "not a contiguous run aligned",
                 lambda: dist.all_to_all_single(torch.empty(2, device="neuron"), t, group=pair))


# ---------------------------------------------------------------------- the spawn harness
def _entry(rank, job, world, port, cache_dir):
    os.environ["TRNPLAN_CACHE_DIR"] = cache_dir
    sys.path.insert(0, str(TESTS))
    torch.set_num_threads(1)
    import neuron_device_standin as devsi
    import neuron_pg_standin as pgsi

    devsi.install()
    devsi.register_compile_backend()
    pgsi.install()
    dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")  # the test's own gathers, outside the stand-in's rules
    try:
        globals()[job](rank, world, gloo)
        dist.barrier(group=gloo)
    finally:
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # as tests/test_distributed.py: no interpreter teardown under gloo's threads


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(job: str, world: int, tmp_path) -> None:
    import torch.multiprocessing as mp

    ctx = mp.start_processes(_entry, args=(job, world, _free_port(), str(tmp_path / "cache")), nprocs=world,
                             join=False, start_method="spawn")
    deadline = time.monotonic() + _JOB_TIMEOUT
    while not ctx.join(timeout=1.0):
        if time.monotonic() > deadline:
            for proc in ctx.processes:
                if proc.is_alive():
                    proc.kill()
            pytest.fail(f"neuron job {job} on {world} ranks did not finish in {_JOB_TIMEOUT:.0f} s (a hang)")


@pytest.mark.slow
def test_two_ranks_neuron(tmp_path):
    """Slab, pencil 1×2, six-step, transposed output, autograd, explain, refusals, on 2 neuron ranks."""
    _spawn("_job_two", 2, tmp_path)


@pytest.mark.slow
def test_four_ranks_neuron(tmp_path):
    """Slab, pencil 2×2 (strided groups inside one chip), uneven slab, six-step, an unaligned group."""
    _spawn("_job_four", 4, tmp_path)


def test_predict_512_cubed_on_32_trn1_cores():
    """The worked example of docs/distributed.md: block arithmetic and the alpha-beta model, term by term."""
    from trnplan.core.collectives import DFT_RATES, PROFILES
    from trnplan.distributed import predict

    trn1 = PROFILES["trn1"]
    points = 512**3 // 32  # complex64 points per rank
    natural = predict((512,) * 3, 32, layout="pencil", transforms=27)
    assert natural["grid"] == (4, 8)
    # rows of 8 then columns of 4, and back: each rank sends all but its own 1/Q of its block
    assert [(q, b) for q, b, _ in natural["exchanges"]] == [(8, 8 * points * 7 // 8), (4, 8 * points * 3 // 4),
                                                           (4, 8 * points * 3 // 4), (8, 8 * points * 7 // 8)]
    assert all(us == trn1.latency_us + b / (trn1.bandwidth_gbs * 1e3) for _, b, us in natural["exchanges"])
    assert natural["compute_us"] == 3 * 8 * 512 * points / DFT_RATES["trn1"] * 1e6
    assert natural["step_ms"] == 27 * (natural["compute_us"] + natural["exchange_us"]) / 1e3
    transposed = predict((512,) * 3, 32, layout="pencil", transposed_output=True, transforms=27)
    assert len(transposed["exchanges"]) == 2 and transposed["step_ms"] < natural["step_ms"]
    slab = predict((512,) * 3, 32, layout="slab", transposed_output=True, batch=9, transforms=3)
    assert [(q, b) for q, b, _ in slab["exchanges"]] == [(32, 9 * 8 * points * 31 // 32)]


def test_pencil_beyond_one_chip_refused_at_plan_time():
    """On 8 or more neuron ranks a pencil's grid columns are strided across chips: refused before any collective."""
    from trnplan.core.errors import NotSupportedYet
    from trnplan.core.problem import Problem
    from trnplan.distributed import _check_split_route

    problem = Problem.create((8, 8, 8), 1, dtype=torch.complex64, device="neuron")
    for ranks in (2, 4):
        _check_split_route(problem, "pencil", "neuron", ranks)  # columns inside one chip
        _check_split_route(problem, "slab", "neuron", ranks)
    for ranks, column in ((8, r"\[0, 4\]"), (16, r"\[0, 4, 8, 12\]")):
        with pytest.raises(NotSupportedYet, match=rf"strided, and group {column} is strided across chips.*layout='slab'"):
            _check_split_route(problem, "pencil", "neuron", ranks)
    _check_split_route(problem, "slab", "neuron", 32)  # one 32-rank group: trn1.32xlarge accepted it


def test_group_rules_of_the_plan_and_the_standin():
    """The documented replica-group rules, in trnplan's plan-time check and in the stand-in (written apart)."""
    sys.path.insert(0, str(TESTS))
    import neuron_pg_standin as pgsi

    from trnplan.distributed import _neuron_group_reason

    for members, ok in (([0], True), ([0, 1], True), ([2, 3], True), ([0, 1, 2, 3], True), ([4, 5, 6, 7], True),
                        ([0, 2], True), ([1, 3], True), ([1, 2], False), ([0, 1, 2], False), ([0, 4], False),
                        ([0, 1, 2, 3, 4, 5], False), ([3, 7], False)):
        assert (pgsi.group_reason(members) is None) is ok, members
        assert (_neuron_group_reason(members) is None) is ok, members
