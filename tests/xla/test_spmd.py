"""trnplan.spmd: distributed FFTs as one SPMD program on torch-xla, 4 and 8 virtual XLA:CPU devices.

Each device count runs in its own child (tests/xla/spmd_child.py): ``xr.use_spmd()`` is
process-global and ``CPU_NUM_DEVICES`` is read once, so the rest of the lane stays non-SPMD. The
child dumps every compiled per-device program (``XLA_FLAGS=--xla_dump_to``) and the tests check,
per case (slab 2-D and 3-D, pencil 3-D; forward and inverse; three norms):

* the result against numpy.fft in complex128 at the fp32 bar (``DEFAULT_TOL``, imported);
* the collectives of every graph the plan compiled: exactly ``plan.exchanges()`` all-to-alls, in
  the mesh axis's replica groups, and no all-gather, all-reduce, reduce-scatter, permute or
  send/recv (a partitioner left to itself all-gathered the whole array: see trnplan/spmd.py);
* per-device memory from XLA's buffer assignment: the input parameters are shards (never the
  whole array), and the bytes beyond the parameters stay within the largest local pass's own
  (that pass compiled alone on the same mesh) plus 1.5× the shard;
* autograd: input gradients against numpy's Fᴴw, on the device, and the backward's program is
  the forward's audited one (same graph hash) or audited itself.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from trnplan.core.accuracy import DEFAULT_TOL

pytestmark = pytest.mark.xla
CHILD = pathlib.Path(__file__).with_name("spmd_child.py")
BAR = DEFAULT_TOL["fp32"]
GROUPS = {  # replica groups of each mesh axis (device ids row-major over the mesh)
    4: {"p": "{{0,1,2,3}}", "p0": "{{0,2},{1,3}}", "p1": "{{0,1},{2,3}}"},
    8: {"p": "{{0,1,2,3,4,5,6,7}}", "p0": "{{0,4},{1,5},{2,6},{3,7}}", "p1": "{{0,1,2,3},{4,5,6,7}}"},
}


@pytest.fixture(scope="module", params=[4, 8], ids=["4dev", "8dev"])
def run(request, tmp_path_factory):
    devices = request.param
    dump = tmp_path_factory.mktemp(f"hlo{devices}")
    env = {**os.environ, "PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": str(devices),
           "XLA_FLAGS": f"--xla_dump_to={dump} --xla_dump_hlo_as_text",
           "TRNPLAN_CACHE_DIR": str(tmp_path_factory.mktemp("cache"))}
    proc = subprocess.run([sys.executable, str(CHILD), str(devices), str(dump)], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return devices, json.loads(lines[-1][len("RESULT "):])


def _audit(graph: dict, exchanges: list, devices: int) -> None:
    ops = graph["ops"]
    assert ops["all-to-all"] == len(exchanges), (graph["name"], ops, exchanges)
    others = {k: v for k, v in ops.items() if k != "all-to-all" and v}
    assert not others, (graph["name"], others)
    assert graph["groups"] == [GROUPS[devices][axis] for axis, _ in exchanges], (graph["name"], graph["groups"])


def test_values_and_devices(run):
    devices, out = run
    assert out["devices"] == devices
    for name, case in out["cases"].items():
        assert case["err"] <= BAR, (name, case["err"])
        assert case["out_device"] == ["xla:0", "xla:0"], name
        if "grad_err" in case:
            assert case["grad_err"] <= BAR, (name, case["grad_err"])
            assert case["grad_device"] == "xla:0", name


def test_collectives_of_every_graph(run):
    devices, out = run
    for name, case in out["cases"].items():
        ex = case["exchanges"]
        assert len(ex) == (2 if name.startswith("slab") else 4), (name, ex)
        assert len(case["forward"]) == 1, (name, [g["name"] for g in case["forward"]])  # one program per call
        _audit(case["forward"][0], ex, devices)
        if "grad_err" in case:
            assert case["backward_same_program"] or case["backward"], name
            for graph in case["backward"]:
                _audit(graph, ex, devices)
        for graph in case["readback"]:  # .cpu() of a sharded result gathers it for the host, outside the plan
            assert "ReplicateShardedData" in graph["name"], graph["name"]


def test_per_device_memory(run):
    _, out = run
    for name, case in out["cases"].items():
        graph, shard = case["forward"][0], case["shard_bytes"]
        mine = "f32[" + ",".join(map(str, case["shard_shape"])) + "]"
        data = [size for size, shape in graph["params"] if shape == mine]
        assert data == [shard // 2] * 2, (name, graph["params"], mine)  # re and im: this device's block
        whole = "f32[" + ",".join(map(str, case["global_shape"])) + "]"
        assert all(shape != whole for _, shape in graph["params"]), (name, graph["params"])  # never the whole array
        assert graph["nonparam"] <= case["workspace"] + 1.5 * shard, (name, graph["nonparam"], case["workspace"],
                                                                      shard)


def test_explain_lists_the_exchanges(run):
    _, out = run
    for name, case in out["cases"].items():
        text = case["explain"]
        assert text.count("all-to-all in mesh axis") == len(case["exchanges"]), name
        assert "local pass over axis" in text and "no all-gather" in text


def test_refusals(run):
    devices, out = run
    if devices != 4:
        pytest.skip("the refusals run in the 4-device child")
    assert out["uneven"][0] == "NotSupportedYet" and "does not divide it" in out["uneven"][1]
    assert out["pencil2d"][0] == "NotSupportedYet" and "built for rank 3" in out["pencil2d"][1]
