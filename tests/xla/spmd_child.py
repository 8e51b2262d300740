"""The SPMD child of tests/xla/test_spmd.py: runs in its own process (``xr.use_spmd()`` is process-global).

Usage: ``python spmd_child.py DEVICES DUMP_DIR`` with ``PJRT_DEVICE=CPU CPU_NUM_DEVICES=DEVICES`` and
``XLA_FLAGS=--xla_dump_to=DUMP_DIR --xla_dump_hlo_as_text``. Prints one JSON line: per case the
error against numpy complex128, the collectives of every graph it compiled (the per-device
programs after SPMD partitioning), the per-device memory from XLA's buffer assignment, and the
same for each local pass compiled alone (the plan's own workspace).
"""

from __future__ import annotations

import json
import pathlib
import re
import sys

import numpy as np
import torch
import torch_xla
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr

xr.use_spmd()

import trnplan.spmd as sp  # after use_spmd, before any xla tensor
from trnplan.core.errors import NotSupportedYet

DEVICES, DUMP = int(sys.argv[1]), pathlib.Path(sys.argv[2])
DEV = torch_xla.device()
COLLECTIVES = ("all-to-all", "all-gather", "all-reduce", "reduce-scatter", "collective-permute",
               "collective-broadcast", "send", "recv")
_SEEN: set = set()


def new_graphs() -> list[dict]:
    """The per-device programs compiled since the last call: collectives and buffer assignment."""
    out = []
    for path in sorted(DUMP.glob("*.cpu_after_optimizations.txt")):
        if path.name in _SEEN:
            continue
        _SEEN.add(path.name)
        text = path.read_text()
        ops = {}
        for name in COLLECTIVES:
            ops[name] = len(re.findall(rf"= [^\n]*? {name}(?:-start)?\(", text))
        groups = re.findall(r" all-to-all\([^\n]*replica_groups=(\{[^ ]*\})", text)
        out.append({"name": path.name, "ops": ops, "groups": groups, **memory(path)})
    return out


def memory(path: pathlib.Path) -> dict:
    """Bytes per device from XLA's buffer assignment: total, parameters by shape, the rest."""
    text = path.with_name(path.name.replace(".txt", "-buffer-assignment.txt")).read_text()
    total = int(re.search(r"Total bytes used: (\d+)", text).group(1))
    params = [(int(m.group(1)), m.group(2)) for m in
              re.finditer(r"^allocation \d+: size (\d+), parameter \d+, shape \|([^|]*)\|", text, re.MULTILINE)]
    return {"total": total, "params": params, "nonparam": total - sum(s for s, _ in params)}


def host(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float64)


def pass_workspace(plan) -> int:
    """Largest non-parameter bytes per device of one local pass compiled alone on the same mesh."""
    worst = 0
    for step in plan.steps:
        if not isinstance(step, sp._Pass):
            continue
        n = int(np.prod(step.shape))
        spec = (tuple(plan.mesh.axis_names) if plan.layout == "pencil" else plan.mesh.axis_names[0], None)
        # device data (parameters of the program, like the plan's input), not zeros made in the graph
        x = [xs.mark_sharding(torch.zeros(step.count, n).to(DEV), plan.mesh, spec).global_tensor for _ in range(2)]
        outs = [xs.mark_sharding(y, plan.mesh, spec).global_tensor for y in step.module(*x)]
        torch_xla.sync()
        del outs, x
        graphs = new_graphs()
        worst = max([worst, *(g["nonparam"] for g in graphs if "SyncTensorsGraph" in g["name"])])
    return worst


def case(name, shape, batch, *, layout, inverse=False, norm="backward", grad=False, seed=0):
    plan = sp.plan_many(shape, batch, layout=layout, inverse=inverse, norm=norm, cache=None)
    new_graphs()  # plan time may compile (the precision probe): not the plan's program
    g = np.random.default_rng(seed)
    z = g.standard_normal((batch, *shape)) + 1j * g.standard_normal((batch, *shape))
    re = torch.from_numpy(z.real).float().to(DEV)
    im = torch.from_numpy(z.imag).float().to(DEV)
    re.requires_grad_(grad)
    im.requires_grad_(grad)
    yr, yi = plan.execute(re, im)
    forward_hash = torch_xla._XLAC._get_graph_hash([yr, yi])
    torch_xla.sync()
    forward = new_graphs()
    axes = tuple(range(1, len(shape) + 1))
    ref = (np.fft.ifftn if inverse else np.fft.fftn)(z, axes=axes, norm=norm)
    y = host(yr) + 1j * host(yi)
    res = {"err": float(np.linalg.norm(y - ref) / np.linalg.norm(ref)), "forward": forward,
           "exchanges": plan.exchanges(), "global_shape": [batch, *shape],
           "shard_shape": [n // (dict(zip(plan.mesh.axis_names, plan.mesh.mesh_shape))[m] if m else 1)
                           for n, m in zip((batch, *shape), plan.in_spec)], "shard_bytes": 8 * batch * int(np.prod(shape)) // DEVICES,
           "explain": plan.explain(), "out_device": [str(yr.device), str(yi.device)]}
    res["readback"] = new_graphs()  # .cpu() of a sharded array: XLA's ReplicateShardedData, not the plan
    res["workspace"] = pass_workspace(plan)
    if grad:
        w = g.standard_normal((batch, *shape)) + 1j * g.standard_normal((batch, *shape))
        wr = torch.from_numpy(w.real).float().to(DEV)
        wi = torch.from_numpy(w.imag).float().to(DEV)
        # no scalar loss: its sum over a sharded array would add an all-reduce to the audited graph
        torch.autograd.backward((yr, yi), (wr, wi))
        # the adjoint's program has the forward's shapes and ops (its DFT matrices are parameters):
        # XLA reuses the forward's compiled, audited executable when the graph hashes agree
        res["backward_same_program"] = torch_xla._XLAC._get_graph_hash([re.grad, im.grad]) == forward_hash
        torch_xla.sync()
        res["backward"] = new_graphs()
        # the gradient of Re Σ conj(w)·y is Fᴴ w = conj(F conj(w))
        fwd = np.fft.ifftn if inverse else np.fft.fftn
        gref = np.conj(fwd(np.conj(w), axes=axes, norm=norm))
        gz = host(re.grad) + 1j * host(im.grad)
        res["grad_err"] = float(np.linalg.norm(gz - gref) / np.linalg.norm(gref))
        res["grad_device"] = str(re.grad.device)
        new_graphs()
    return name, res


def refusal(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the test asserts the type and the message
        return [type(exc).__name__, str(exc)]
    return None


def main() -> None:
    out = {"devices": xr.global_runtime_device_count()}
    if DEVICES == 4:
        cases = [case("slab2d", (16, 32), 2, layout="slab", grad=True),
                 case("slab3d", (8, 8, 16), 1, layout="slab", inverse=True, norm="ortho"),
                 case("pencil", (8, 12, 16), 1, layout="pencil", grad=True)]
        out["uneven"] = refusal(lambda: sp.plan_many((6, 8), layout="slab", cache=None))
        out["pencil2d"] = refusal(lambda: sp.plan_many((8, 8), layout="pencil", cache=None))
    else:
        cases = [case("slab3d", (8, 16, 8), 2, layout="slab", norm="forward"),
                 case("pencil", (8, 8, 16), 1, layout="pencil", inverse=True, grad=True)]
    out["cases"] = dict(cases)
    out["NotSupportedYet"] = NotSupportedYet.__name__
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
