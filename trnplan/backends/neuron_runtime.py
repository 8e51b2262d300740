"""Which PyTorch runtime for Trainium this process has, found by package version and device
registration, never by whether an import succeeds.

Two runtimes share the package name ``torch-neuronx`` and cannot share a virtual environment
(../shared/neuron/runtimes.md §1):

``"torchneuron"``
    TorchNeuron, the native PrivateUse1 ``neuron`` device: torch-neuronx 2.13.* / 2.14.* (any
    version from 2.10 on: "TorchNeuron takes over from 2.10", notes.md *Lifecycle*) *and* the
    PrivateUse1 backend registered under the name ``"neuron"``
    (``torch._C._get_privateuse1_backend_name()``; the backend autoloads with torch ≥ 2.9, so no
    ``import torch_neuronx`` is needed to see it). Trn2/Trn3 only. Used through
    ``torch.compile(backend="neuron")`` by the accelerator backend.
``"xla-trace"``
    The XLA-based torch-neuronx (``2.9.0.2.*`` is the last; earlier ``2.x.y.2.*`` are end of
    life) on torch-xla: ``torch_neuronx.trace`` into a NEFF inside TorchScript. The only PyTorch
    route to trn1/inf2. Used by :mod:`trnplan.backends.neuron`.
``None``
    Neither: :attr:`NeuronRuntime.reason` says why and :data:`INSTALL_BOTH` how to install each.

An import test would be wrong both ways: ``import torch_neuronx`` succeeds for both runtimes (and
for a test stand-in, or PyPI's 1–2 KB placeholder package, which has no version of the SDK's
form), and on TorchNeuron it is not even needed. The version of the *distribution* says which
library it is; the device registration says whether the native backend is live in this torch.

NeuronCores: a Neuron device file ``/dev/neuron<N>`` is one chip (the driver's device nodes; a
container is given them with ``--device=/dev/neuron0``). Logical cores per chip
(runtimes.md §2 *Multi-core*; SDK about-neuron/arch/neuron-features/logical-neuroncore-config.rst):
trn1/trn1n/inf2 2 NeuronCore-v2; trn2 8 NeuronCore-v3, grouped two per logical core by default
(``NEURON_LOGICAL_NC_CONFIG=2``) → 4, or 8 with ``NEURON_LOGICAL_NC_CONFIG=1``. A process sees
``NEURON_RT_VISIBLE_CORES`` ("Integer range (like 1-3)") if set, else ``NEURON_RT_NUM_CORES``
of them (0 = all), else all (SDK neuron-runtime/nrt-configurable-parameters.rst).
"""

from __future__ import annotations

import functools
import glob
import importlib.metadata
import os
import sys

import attrs
import torch

from trnplan.core import config, state

#: the Neuron driver's device files, one per chip (a build host has none).
#: ``TRNPLAN_NEURON_DEVICE_FILES`` (a glob) overrides it: a container that maps the devices
#: elsewhere, and the tests' stand-in hosts
DEVICE_FILES = "/dev/neuron[0-9]*"

#: logical NeuronCores per chip with the default logical-core setting, by instance family
#: (runtimes.md §2 Multi-core; trn2: 8 NC-v3 per chip, LNC=2 by default → 4)
CORES_PER_CHIP = {"trn1": 2, "trn1n": 2, "inf2": 2, "trn2": 4, "trn3": 4}
#: physical NeuronCores per chip where the logical-core setting applies (trn2, trn3: 8)
PHYSICAL_CORES_PER_CHIP = {"trn2": 8, "trn3": 8}

INSTALL_TORCHNEURON = (
    "TorchNeuron (trn2/trn3): the Neuron DLAMI's PyTorch 2.13/2.14 environment, or pip install torch-neuronx==2.14.* "
    "--extra-index-url https://pip.repos.neuron.amazonaws.com (torch 2.14, Python 3.12+); it registers the native "
    "'neuron' device"
)
#: DLAMIs and DLCs of SDK 2.32 and later no longer include torch-neuronx on XLA (SDK 2.32 docs,
#: setup/pytorch/index.html: "pin your environment to Neuron v2.31.0")
INSTALL_XLA_TRACE = (
    "torch-neuronx on PyTorch/XLA (trn1/trn1n/inf2, also trn2): the PyTorch 2.9 virtual environment of a Neuron "
    "DLAMI of SDK 2.31 or earlier (later DLAMIs no longer include it), or in a venv pip install torch-neuronx==2.9.* "
    "neuronx-cc --extra-index-url https://pip.repos.neuron.amazonaws.com (PyPI has placeholders only)"
)
INSTALL_BOTH = f"install one of: {INSTALL_TORCHNEURON}; or {INSTALL_XLA_TRACE}. The two cannot share a virtual environment"

#: first torch-neuronx major.minor that is TorchNeuron (notes.md Lifecycle: "TorchNeuron takes over from 2.10")
_NATIVE_FROM = (2, 10)
#: first XLA-based torch-neuronx: its versions are the torch version then the Neuron release
#: (1.13.1.1.*, ..., 2.9.0.2.*), from torch 1.13 on
_XLA_FROM = (1, 13)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


_VERSIONS: dict = {}
state.register("backends.neuron_runtime.versions", _VERSIONS.clear)


def _versions() -> tuple:
    """(torch-neuronx, torch-xla, libneuronxla, neuronx-cc) versions. A metadata look-up scans
    sys.path (~6 ms for an absent package), so they are kept per sys.path (and per look-up
    function, which tests replace); installing a package mid-process with the same sys.path is
    not seen."""
    key = (tuple(sys.path), importlib.metadata.version)
    if _VERSIONS.get("key") != key:  # one entry: the last sys.path and look-up function
        _VERSIONS["versions"] = tuple(_version(d) for d in ("torch-neuronx", "torch-xla", "libneuronxla", "neuronx-cc"))
        _VERSIONS["key"] = key
    return _VERSIONS["versions"]


def _major_minor(version: str | None) -> tuple[int, int] | None:
    if not version:
        return None
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def _privateuse1_name() -> str:
    try:
        return torch._C._get_privateuse1_backend_name()
    except Exception:  # noqa: BLE001 - a torch without the accessor has no PrivateUse1 backend
        return "privateuseone"


def _torch_neuron_device_count() -> int | None:
    module = getattr(torch, "neuron", None)
    count = getattr(module, "device_count", None)
    if count is None:
        return None
    try:
        return int(count())
    except Exception:  # noqa: BLE001 - a runtime that cannot start has no device to count
        return 0


@functools.lru_cache(maxsize=1)
def _runtime_lib_version() -> str | None:
    """The Neuron runtime library's (libnrt) package version, from dpkg's database (Ubuntu DLAMI);
    read once per process (the database can be megabytes)."""
    try:
        with open("/var/lib/dpkg/status", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    for block in text.split("\n\n"):
        if "Package: aws-neuronx-runtime-lib\n" in block + "\n":
            for line in block.splitlines():
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    return None


def parse_core_range(text: str) -> list[int]:
    """The core indices of a ``NEURON_RT_VISIBLE_CORES`` value: ``"3"``, ``"1-3"`` or ``"0,2-3"``.

    Raises
    ------
    ValueError
        For anything else, naming the variable and the accepted forms.
    """
    cores: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            lo, dash, hi = part.partition("-")
            first, last = int(lo), int(hi) if dash else int(lo)
            if first < 0 or last < first:
                raise ValueError
            cores.extend(range(first, last + 1))
    except ValueError:
        raise ValueError(f"NEURON_RT_VISIBLE_CORES={text!r} is not a core index or range: use e.g. '0', '0-1' or "
                         f"'0,2-3' (SDK neuron-runtime configuration guide)") from None
    return sorted(set(cores))


@attrs.frozen
class NeuronRuntime:
    """What this process has for Trainium (:func:`detect`). Versions are ``None`` when absent."""

    kind: str | None  #: "torchneuron" | "xla-trace" | None
    reason: str  #: one sentence: why this kind (or why none)
    torch: str
    torch_neuronx: str | None
    torch_xla: str | None
    libneuronxla: str | None
    neuronx_cc: str | None
    runtime_lib: str | None  #: aws-neuronx-runtime-lib (libnrt) package version, if dpkg knows it
    privateuse1: str  #: torch's PrivateUse1 backend name ("neuron" when TorchNeuron registered it)
    device_count: int | None  #: torch.neuron.device_count() (TorchNeuron only)
    chips: int  #: Neuron device files (/dev/neuron<N>): 0 on a build host
    family: str | None  #: instance family (trn1, trn1n, inf2, trn2, ...) when known
    visible_cores_env: str | None  #: NEURON_RT_VISIBLE_CORES as set
    num_cores_env: str | None  #: NEURON_RT_NUM_CORES as set
    logical_nc_config: str | None  #: NEURON_LOGICAL_NC_CONFIG as set (trn2/trn3 logical-core size)

    def visible_cores(self) -> int | None:
        """How many (logical) NeuronCores this process may use; ``None`` when it cannot be told
        without starting the runtime (an unknown instance family)."""
        if self.kind == "torchneuron" and self.device_count is not None:
            return self.device_count
        if self.chips == 0:
            return 0
        if self.visible_cores_env:
            return len(parse_core_range(self.visible_cores_env))
        total = self.total_cores()
        if self.num_cores_env and self.num_cores_env.strip() not in ("", "0"):
            try:
                asked = int(self.num_cores_env)
            except ValueError:
                raise ValueError(f"NEURON_RT_NUM_CORES={self.num_cores_env!r} must be a whole number (0 = all)") from None
            return asked if total is None else min(asked, total)
        return total

    def total_cores(self) -> int | None:
        """Logical NeuronCores on the machine: chips × cores per chip for the family (and LNC)."""
        if self.family not in CORES_PER_CHIP:
            return None
        per = CORES_PER_CHIP[self.family]
        if self.family in PHYSICAL_CORES_PER_CHIP and self.logical_nc_config:
            try:
                per = PHYSICAL_CORES_PER_CHIP[self.family] // max(1, int(self.logical_nc_config))
            except ValueError:
                pass
        return self.chips * per

    def versions(self) -> dict[str, str]:
        """The fingerprint's view: every version and setting that changes what a NEFF is or does."""
        return {"torch-neuronx": self.torch_neuronx or "absent", "torch-xla": self.torch_xla or "absent",
                "libneuronxla": self.libneuronxla or "absent", "neuronx-cc": self.neuronx_cc or "absent",
                "neuron-runtime": self.runtime_lib or "unknown",
                "neuron_logical_nc_config": self.logical_nc_config or "default"}

    def compile_key(self) -> dict[str, str]:
        """What changes the NEFF a plan compiles to: the compiler and the libraries that hand it the
        graph, and the logical-core size. Not the runtime library (``neuron-runtime``, from dpkg): a
        pip-only build container has no dpkg record of it, and it does not change the NEFF; it stays
        in :meth:`versions` (explain()). Plan cache keys use this."""
        return {k: v for k, v in self.versions().items() if k != "neuron-runtime"}

    def describe(self) -> str:
        cores = self.visible_cores()
        where = ("no NeuronCore (no /dev/neuron* device: a build host)" if self.chips == 0 and self.kind != "torchneuron"
                 else f"{cores if cores is not None else 'unknown number of'} visible NeuronCore(s)")
        vers = ", ".join(f"{k} {v}" for k, v in self.versions().items())
        return f"runtime {self.kind or 'none'} ({self.reason}); {where}; {vers}"


def instance_family() -> str | None:
    """The EC2 instance family from the DMI product name (``trn1.32xlarge`` → ``trn1``), else None."""
    try:
        with open("/sys/devices/virtual/dmi/id/product_name") as f:
            family = f.read().strip().split(".", 1)[0]
    except OSError:
        return None
    return family if family in CORES_PER_CHIP else None


def detect(environ=None) -> NeuronRuntime:
    """The Trainium runtime of this process, from package metadata, torch's PrivateUse1
    registration, the Neuron device files and the ``NEURON_*`` environment. Imports nothing."""
    env = os.environ if environ is None else environ
    tnx, xla, lib, cc = _versions()
    pu1 = _privateuse1_name()
    mm = _major_minor(tnx)
    native_version = mm is not None and mm >= _NATIVE_FROM
    xla_version = mm is not None and _XLA_FROM <= mm < _NATIVE_FROM
    count = None
    if pu1 == "neuron" and (tnx is None or native_version):
        kind = "torchneuron"
        count = _torch_neuron_device_count()
        reason = (f"torch-neuronx {tnx or '(version unknown)'}: the native PrivateUse1 'neuron' device is registered")
    elif native_version:
        kind = None
        reason = (f"torch-neuronx {tnx} is TorchNeuron but torch's PrivateUse1 backend is {pu1!r}, not 'neuron': "
                  f"the backend did not load (TORCH_DEVICE_BACKEND_AUTOLOAD=0, or a torch {torch.__version__} it was "
                  f"not built for)")
    elif xla_version and xla is not None:
        kind = "xla-trace"
        reason = f"torch-neuronx {tnx} on torch-xla {xla}: torch_neuronx.trace (the XLA-based library)"
    elif xla_version:
        kind = None
        reason = f"torch-neuronx {tnx} is the XLA-based library but torch-xla is not installed"
    elif tnx is not None:
        kind = None
        reason = f"torch-neuronx {tnx!r} is not a version of either runtime (PyPI's placeholder?)"
    else:
        kind = None
        reason = "torch-neuronx is not installed"
    return NeuronRuntime(
        kind=kind, reason=reason, torch=torch.__version__, torch_neuronx=tnx, torch_xla=xla, libneuronxla=lib,
        neuronx_cc=cc, runtime_lib=_runtime_lib_version(), privateuse1=pu1, device_count=count,
        chips=len(glob.glob(config.neuron_device_files(env) or DEVICE_FILES)), family=instance_family(),
        visible_cores_env=env.get("NEURON_RT_VISIBLE_CORES") or None,
        num_cores_env=env.get("NEURON_RT_NUM_CORES") or None,
        logical_nc_config=env.get("NEURON_LOGICAL_NC_CONFIG") or None,
    )


state.register("backends.neuron_runtime.runtime_lib_version", _runtime_lib_version.cache_clear)


__all__ = ["CORES_PER_CHIP", "INSTALL_BOTH", "INSTALL_TORCHNEURON", "INSTALL_XLA_TRACE", "NeuronRuntime", "detect",
           "instance_family", "parse_core_range"]
