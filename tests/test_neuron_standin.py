"""The test stand-in for the XLA-based ``torch_neuronx`` 2.9 (the ``torch_neuronx.trace`` route), and
tests that it is honest about the four things trnplan got wrong against the real one (issue 18).

THE STAND-IN TESTS TRNPLAN'S INTEGRATION, NOT THE NEURON COMPILER. ``torch_neuronx`` cannot be
installed here (PyPI has placeholders only). :func:`write_standin` writes, into a directory of the
test's own, a package ``torch_neuronx`` and the *distribution metadata* of torch-neuronx
2.9.0.2.*, torch-xla 2.9 and neuronx-cc, so that trnplan's runtime detection (package versions,
never an import: trnplan/backends/neuron_runtime.py) finds the trace route exactly as on a trn1,
and a directory of fake Neuron device files (``TRNPLAN_NEURON_DEVICE_FILES``): one file is a
device host, none a build host. Put the directory on ``sys.path`` (in this process:
:func:`activate`) or on ``PYTHONPATH`` (a child process: :func:`child_env`).

What the stand-in does like the real one (api-torch-neuronx-trace.rst, the torch-neuronx 2.9
placement source, runtimes.md §3):

- ``trace(func, example_inputs, *, compiler_workdir, compiler_args, cpu_backend, ...)`` returns a
  TorchScript module whose graph calls an op ``neuron::standin_forward`` that only ``import
  torch_neuronx`` registers: ``torch.jit.load`` in a process that did not import it fails with
  "Unknown builtin op: neuron::standin_forward" (the real "neuron::forward_v2").
- That op refuses an input of any shape other than the traced one (a NEFF has fixed shapes).
- Loading a traced model places it on a NeuronCore (the runtime's process-wide default, set by
  ``neuron_cores_context``) and records where; on a build host (no device file) the load, the
  op and the placement context raise "Neuron runtime cannot be initialized", and ``trace`` without
  ``cpu_backend=True`` fails (no Neuron device to trace on).
- Only the supported placement API, ``torch_neuronx.neuron_cores_context`` (no ``experimental``
  namespace: it ended support after SDK 2.24). Like the real one it sets a process-wide default
  and is not thread-safe; the stand-in holds the default for 10 ms and records any overlap of two
  contexts (``OVERLAPS``), which the real one would silently turn into a misplaced model.
- A core index outside the visible cores (2 per device file, or ``NEURON_RT_VISIBLE_CORES``)
  fails at load.
- ``TRNPLAN_STANDIN_TRACE_FAILS=1``: ``trace`` writes a neuronx-cc style log into
  ``compiler_workdir`` and raises, as a failed compile does.

Nothing is compiled: ``trace`` is ``torch.jit.trace``, and the "device" is this CPU.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

STANDIN_VERSION = "2.9.0.2.0+trnplan.standin"

STANDIN_SOURCE = '''
"""TEST-ONLY stand-in for the XLA-based torch_neuronx 2.9 (trnplan tests/test_neuron_standin.py).
It tests trnplan's integration, NOT the Neuron compiler: trace is torch.jit.trace, nothing is compiled."""
import contextlib
import glob
import os
import threading
import time

import torch

__version__ = "2.9.0.2.0+trnplan.standin"
STANDIN = True
CALLS = []       # one dict per trace(): compiler_args, cpu_backend, compiler_workdir
PLACEMENTS = []  # the NeuronCore each loaded model landed on (-1: the runtime's own choice)
OVERLAPS = []    # placement contexts entered while another was active (the real one misplaces silently)
_DEFAULT = [-1, -1]  # the runtime's process-wide default (start_nc, nc_count)
_ACTIVE = [0]
_STATE = threading.Lock()
#: tracing in progress (the op runs then on the host, device or not); kept on torch so that the op,
#: registered once per process, sees the flag of a re-imported stand-in too
_TRACING = torch.__dict__.setdefault("_trnplan_standin_tracing", [0])


def _visible_cores():
    """As torch.classes.neuron.Runtime().get_visible_nc_count(): raises without a Neuron device."""
    devices = glob.glob(os.environ.get("TRNPLAN_NEURON_DEVICE_FILES") or "/dev/neuron[0-9]*")
    if not devices:
        raise RuntimeError("Neuron runtime cannot be initialized; cannot determine the number of available "
                           "NeuronCores (stand-in: no Neuron device file, a build host)")
    visible = os.environ.get("NEURON_RT_VISIBLE_CORES")
    if visible:
        count = 0
        for part in visible.split(","):
            lo, dash, hi = part.partition("-")
            count += int(hi) - int(lo) + 1 if dash else 1
        return count
    return 2 * len(devices)


def _forward(x: torch.Tensor, shape: list[int]) -> torch.Tensor:
    if list(x.shape) != list(shape):
        raise RuntimeError(f"stand-in NEFF: input shape {list(x.shape)} is not the traced shape {list(shape)} "
                           f"(a traced Neuron model takes exactly the shapes it was traced with)")
    if not torch.__dict__["_trnplan_standin_tracing"][0]:
        _visible_cores()  # running a loaded model needs a NeuronCore
    return x.clone()


try:  # registered once per process (a second import of the stand-in reuses it)
    torch.ops.neuron.standin_forward
except (AttributeError, RuntimeError):
    torch.library.custom_op("neuron::standin_forward", mutates_args=())(_forward)


def trace(func, example_inputs, *_, input_output_aliases=None, compiler_workdir=None, compiler_args=None,
          partitioner_config=None, inline_weights_to_neff=True, cpu_backend=False):
    example = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    CALLS.append({"compiler_args": list(compiler_args or ()), "cpu_backend": cpu_backend,
                  "compiler_workdir": None if compiler_workdir is None else str(compiler_workdir)})
    if os.environ.get("TRNPLAN_STANDIN_TRACE_FAILS") == "1":
        log = None
        if compiler_workdir is not None:
            os.makedirs(compiler_workdir, exist_ok=True)
            log = os.path.join(str(compiler_workdir), "log-neuron-cc.txt")
            with open(log, "w") as f:
                f.write("ERROR [NCC_STANDIN] stand-in compile failure (TRNPLAN_STANDIN_TRACE_FAILS=1)\\n")
        raise RuntimeError(f"neuronx-cc failed with 70 (stand-in){'; see ' + log if log else ''}")
    if not cpu_backend:
        _visible_cores()  # tracing records on the Neuron XLA device: none on a build host
    inner = torch.jit.trace(func, example, check_trace=False)
    shapes = [[int(s) for s in t.shape] for t in example]

    class NeuronModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, *inputs):
            return self.inner(*(torch.ops.neuron.standin_forward(t, s) for t, s in zip(inputs, shapes)))

    _TRACING[0] += 1
    try:
        return torch.jit.trace(NeuronModel(), example, check_trace=False)
    finally:
        _TRACING[0] -= 1


@contextlib.contextmanager
def neuron_cores_context(start_nc=-1, nc_count=-1):
    _visible_cores()
    if nc_count == 0 or nc_count < -1:
        raise ValueError(f"Invalid NeuronCore count nc_count={nc_count}")
    with _STATE:
        if _ACTIVE[0]:
            OVERLAPS.append(start_nc)
        _ACTIVE[0] += 1
        old = list(_DEFAULT)
        _DEFAULT[:] = [start_nc, nc_count]
    time.sleep(0.01)  # the window in which another thread's context would clobber the default
    try:
        yield
    finally:
        with _STATE:
            _DEFAULT[:] = old
            _ACTIVE[0] -= 1


_jit_load = torch.jit.load


def _load(f, *args, **kwargs):
    """torch.jit.load; a traced Neuron model is bound to a NeuronCore as it loads (placement)."""
    module = _jit_load(f, *args, **kwargs)
    if "neuron::standin_forward" in str(module.inlined_graph):
        visible = _visible_cores()
        start = _DEFAULT[0]
        if start >= visible:
            raise RuntimeError(f"stand-in: cannot load onto NeuronCore {start}: this process sees {visible}")
        time.sleep(0.002)
        PLACEMENTS.append(start)
    return module


torch.jit.load = _load


def _restore():
    """Undo the jit.load hook (the tests' teardown)."""
    torch.jit.load = _jit_load
'''


def write_standin(root, devices: int = 1) -> dict:
    """Write the stand-in package, its distribution metadata and ``devices`` fake device files
    under ``root``; return ``{"site": dir for sys.path, "devices": glob}``."""
    root = os.fspath(root)
    site = os.path.join(root, "site")
    os.makedirs(os.path.join(site, "torch_neuronx"), exist_ok=True)
    with open(os.path.join(site, "torch_neuronx", "__init__.py"), "w") as f:
        f.write(STANDIN_SOURCE)
    # torch-xla's and neuronx-cc's metadata only: the runtime is told by versions, and nothing here
    # may import torch_xla (the stand-in does not)
    for name, version in (("torch_neuronx", STANDIN_VERSION), ("torch_xla", "2.9.0+trnplan.standin"),
                          ("libneuronxla", "2.2.0+trnplan.standin"), ("neuronx_cc", "2.21.0+trnplan.standin")):
        info = os.path.join(site, f"{name}-{version}.dist-info")
        os.makedirs(info, exist_ok=True)
        with open(os.path.join(info, "METADATA"), "w") as f:
            f.write(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
    dev = os.path.join(root, "dev")
    os.makedirs(dev, exist_ok=True)
    for i in range(devices):
        open(os.path.join(dev, f"neuron{i}"), "w").close()
    return {"site": site, "devices": os.path.join(dev, "neuron[0-9]*")}


def child_env(standin: dict, **extra) -> dict:
    """The environment of a child process that sees the stand-in (and this worktree's trnplan)."""
    path = os.pathsep.join([standin["site"], os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "PYTHONPATH": path, "TRNPLAN_NEURON_DEVICE_FILES": standin["devices"], **extra}


@contextlib.contextmanager
def activate(standin: dict, monkeypatch):
    """The stand-in in this process: on sys.path, its device files and 4 visible cores set; the
    imported module is yielded (trnplan would import it itself)."""
    monkeypatch.setenv("TRNPLAN_NEURON_DEVICE_FILES", standin["devices"])
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "0-3")
    sys.modules.pop("torch_neuronx", None)
    sys.path.insert(0, standin["site"])
    importlib.invalidate_caches()
    try:
        import torch_neuronx

        yield torch_neuronx
    finally:
        module = sys.modules.pop("torch_neuronx", None)
        if module is not None and getattr(module, "STANDIN", False):
            module._restore()
        sys.path.remove(standin["site"])
        importlib.invalidate_caches()


@pytest.fixture
def standin_dir(tmp_path_factory):
    return write_standin(tmp_path_factory.mktemp("neuron-standin"))


class _Double(torch.nn.Module):
    def forward(self, a, b):
        return a * 2, a + b


def _traced_bytes(tnx, **kwargs) -> bytes:
    traced = tnx.trace(_Double(), (torch.ones(4, 8), torch.ones(4, 8)), **kwargs)
    buffer = io.BytesIO()
    torch.jit.save(traced, buffer)
    return buffer.getvalue()


# ---------------------------------------------------------------------- the stand-in's honesty
def test_loading_a_traced_model_needs_the_import(standin_dir, tmp_path, monkeypatch):
    with activate(standin_dir, monkeypatch) as tnx:
        (tmp_path / "m.pt").write_bytes(_traced_bytes(tnx))
    script = textwrap.dedent(f"""
        import sys, torch
        try:
            torch.jit.load({str(tmp_path / "m.pt")!r})
        except RuntimeError as exc:
            print("REFUSED", exc)
            sys.exit(0)
        print("LOADED")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env=child_env(standin_dir), check=False)
    assert "REFUSED" in out.stdout and "Unknown builtin op: neuron::standin_forward" in out.stdout, out.stderr[-2000:]
    # with the import first, it loads
    script = script.replace("import sys, torch", "import sys, torch, torch_neuronx")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env=child_env(standin_dir), check=False)
    assert "LOADED" in out.stdout, out.stderr[-2000:]


def test_a_loaded_model_refuses_another_shape(standin_dir, monkeypatch):
    with activate(standin_dir, monkeypatch) as tnx:
        model = torch.jit.load(io.BytesIO(_traced_bytes(tnx)))
        a, _ = model(torch.ones(4, 8), torch.ones(4, 8))
        assert torch.equal(a, torch.full((4, 8), 2.0))
        with pytest.raises(RuntimeError, match=r"input shape \[5, 8\] is not the traced shape \[4, 8\]"):
            model(torch.ones(5, 8), torch.ones(5, 8))


def test_only_the_supported_placement_api(standin_dir, monkeypatch):
    with activate(standin_dir, monkeypatch) as tnx:
        assert not hasattr(tnx, "experimental")
        data = _traced_bytes(tnx)
        with tnx.neuron_cores_context(start_nc=2, nc_count=1):
            torch.jit.load(io.BytesIO(data))
        torch.jit.load(io.BytesIO(data))
        assert tnx.PLACEMENTS == [2, -1] and tnx.OVERLAPS == []
        with tnx.neuron_cores_context(start_nc=4, nc_count=1), pytest.raises(RuntimeError, match="sees 4"):
            torch.jit.load(io.BytesIO(data))  # NEURON_RT_VISIBLE_CORES=0-3


def test_the_placement_context_is_not_thread_safe(standin_dir, monkeypatch):
    with activate(standin_dir, monkeypatch) as tnx:
        barrier = threading.Barrier(2)

        def enter(core):
            barrier.wait()
            with tnx.neuron_cores_context(start_nc=core, nc_count=1):
                pass

        threads = [threading.Thread(target=enter, args=(c,)) for c in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(tnx.OVERLAPS) == 1  # recorded: the real one would have misplaced a model


def test_a_build_host_cannot_load_or_trace_on_a_device(tmp_path, monkeypatch):
    host = write_standin(tmp_path, devices=0)
    with activate(host, monkeypatch) as tnx:
        with pytest.raises(RuntimeError, match="Neuron runtime cannot be initialized"):
            _traced_bytes(tnx)
        data = _traced_bytes(tnx, cpu_backend=True)  # cpu_backend=True traces without a device
        with pytest.raises(RuntimeError, match="Neuron runtime cannot be initialized"):
            torch.jit.load(io.BytesIO(data))
        with pytest.raises(RuntimeError, match="Neuron runtime cannot be initialized"), \
                tnx.neuron_cores_context(start_nc=0, nc_count=1):
            pass


def test_a_failed_compile_writes_its_log(standin_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TRNPLAN_STANDIN_TRACE_FAILS", "1")
    with activate(standin_dir, monkeypatch) as tnx, pytest.raises(RuntimeError,
                                                                  match="neuronx-cc failed.*log-neuron-cc.txt"):
        _traced_bytes(tnx, compiler_workdir=str(tmp_path / "work"))
    assert "NCC_STANDIN" in (tmp_path / "work" / "log-neuron-cc.txt").read_text()


def test_the_runtime_detection_finds_the_trace_route(standin_dir, monkeypatch):
    from trnplan.backends.neuron_runtime import detect

    with activate(standin_dir, monkeypatch):
        rt = detect()
        assert rt.kind == "xla-trace" and rt.torch_neuronx == STANDIN_VERSION and rt.chips == 1
        assert rt.visible_cores() == 4  # NEURON_RT_VISIBLE_CORES=0-3
    assert detect().kind is None  # gone with it
