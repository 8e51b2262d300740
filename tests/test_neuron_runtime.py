"""Runtime detection for Trainium (trnplan.backends.neuron_runtime), with package metadata, torch's
PrivateUse1 registration and the Neuron device files stood in: no Neuron package is installed here.
"""

from __future__ import annotations

import importlib.metadata
import types

import pytest
import torch

from trnplan.backends import neuron_runtime
from trnplan.backends.neuron_runtime import detect, parse_core_range


def _packages(monkeypatch, **versions):
    """Make importlib.metadata report exactly these distributions (name with '-' as '_')."""
    wanted = {k.replace("_", "-"): v for k, v in versions.items()}

    def version(dist):
        if dist in wanted:
            return wanted[dist]
        raise importlib.metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(importlib.metadata, "version", version)


def _privateuse1(monkeypatch, name, count=None):
    monkeypatch.setattr(torch._C, "_get_privateuse1_backend_name", lambda: name)
    if count is not None:
        monkeypatch.setattr(torch, "neuron", types.SimpleNamespace(device_count=lambda: count), raising=False)


def _chips(monkeypatch, tmp_path, n, family="trn1"):
    for i in range(n):
        (tmp_path / f"neuron{i}").touch()
    monkeypatch.setattr(neuron_runtime, "DEVICE_FILES", str(tmp_path / "neuron[0-9]*"))
    monkeypatch.setattr(neuron_runtime, "instance_family", lambda: family)


def test_this_machine_has_no_runtime():
    rt = detect({})
    assert rt.kind is None and rt.torch_neuronx is None and "not installed" in rt.reason
    assert rt.privateuse1 == "privateuseone" and rt.device_count is None  # stock torch: nothing registered


def test_xla_torch_neuronx_2_9_is_the_trace_route(monkeypatch, tmp_path):
    _packages(monkeypatch, torch_neuronx="2.9.0.2.15.32035", torch_xla="2.9.0", libneuronxla="2.2.14584.0",
              neuronx_cc="2.27.5334.0")
    _chips(monkeypatch, tmp_path, 1, "trn1")
    rt = detect({})
    assert rt.kind == "xla-trace" and "torch_neuronx.trace" in rt.reason
    assert rt.versions() == {"torch-neuronx": "2.9.0.2.15.32035", "torch-xla": "2.9.0",
                             "libneuronxla": "2.2.14584.0", "neuronx-cc": "2.27.5334.0",
                             "neuron-runtime": rt.runtime_lib or "unknown", "neuron_logical_nc_config": "default"}
    assert rt.chips == 1 and rt.visible_cores() == 2  # one trn1 chip: 2 NeuronCore-v2


def test_xla_version_without_torch_xla_is_no_runtime(monkeypatch):
    _packages(monkeypatch, torch_neuronx="2.9.0.2.15.32035")
    rt = detect({})
    assert rt.kind is None and "torch-xla is not installed" in rt.reason


def test_native_version_with_the_device_registered_is_torchneuron(monkeypatch):
    _packages(monkeypatch, torch_neuronx="2.14.3.0", neuronx_cc="2.28.7631.0")
    _privateuse1(monkeypatch, "neuron", count=4)
    rt = detect({})
    assert rt.kind == "torchneuron" and rt.device_count == 4 and rt.visible_cores() == 4


def test_native_version_without_registration_is_not_torchneuron(monkeypatch):
    # the import would succeed, the version says native, but the device is not there: no runtime
    _packages(monkeypatch, torch_neuronx="2.13.3.0")
    _privateuse1(monkeypatch, "privateuseone")
    rt = detect({})
    assert rt.kind is None and "not 'neuron'" in rt.reason and "AUTOLOAD" in rt.reason


def test_an_xla_version_is_never_torchneuron_even_if_something_registered_neuron(monkeypatch):
    _packages(monkeypatch, torch_neuronx="2.9.0.2.15.32035", torch_xla="2.9.0")
    _privateuse1(monkeypatch, "neuron", count=2)
    assert detect({}).kind == "xla-trace"


def test_a_placeholder_or_stand_in_version_is_no_runtime(monkeypatch):
    _packages(monkeypatch, torch_neuronx="0.0.1")
    rt = detect({})
    assert rt.kind is None and "placeholder" in rt.reason


def test_visible_cores_follow_the_runtime_environment(monkeypatch, tmp_path):
    _packages(monkeypatch, torch_neuronx="2.9.0.2.15.32035", torch_xla="2.9.0")
    _chips(monkeypatch, tmp_path, 16, "trn1")  # trn1.32xlarge: 16 chips, 32 cores
    assert detect({}).visible_cores() == 32
    assert detect({"NEURON_RT_VISIBLE_CORES": "4-7"}).visible_cores() == 4
    assert detect({"NEURON_RT_VISIBLE_CORES": "0,2-3"}).visible_cores() == 3
    assert detect({"NEURON_RT_NUM_CORES": "2"}).visible_cores() == 2
    assert detect({"NEURON_RT_NUM_CORES": "0"}).visible_cores() == 32  # 0 = all
    rt = detect({"NEURON_RT_VISIBLE_CORES": "0-1"})
    assert rt.visible_cores_env == "0-1" and "2 visible NeuronCore(s)" in rt.describe()


def test_trn2_logical_core_setting(monkeypatch, tmp_path):
    _packages(monkeypatch, torch_neuronx="2.9.0.2.15.32035", torch_xla="2.9.0")
    _chips(monkeypatch, tmp_path, 1, "trn2")
    assert detect({}).visible_cores() == 4  # 8 NC-v3, LNC=2 by default
    rt = detect({"NEURON_LOGICAL_NC_CONFIG": "1"})
    assert rt.visible_cores() == 8 and rt.logical_nc_config == "1"
    assert rt.versions()["neuron_logical_nc_config"] == "1"


def test_a_build_host_has_no_neuroncore(monkeypatch, tmp_path):
    _packages(monkeypatch, torch_neuronx="2.9.0.2.15.32035", torch_xla="2.9.0")
    _chips(monkeypatch, tmp_path, 0, None)
    rt = detect({"NEURON_RT_VISIBLE_CORES": "0-1"})  # a setting cannot conjure a device
    assert rt.chips == 0 and rt.visible_cores() == 0 and "build host" in rt.describe()


def test_unknown_family_leaves_the_core_count_unknown(monkeypatch, tmp_path):
    _packages(monkeypatch, torch_neuronx="2.9.0.2.15.32035", torch_xla="2.9.0")
    _chips(monkeypatch, tmp_path, 2, None)
    assert detect({}).visible_cores() is None
    assert detect({"NEURON_RT_VISIBLE_CORES": "1"}).visible_cores() == 1


@pytest.mark.parametrize("text, cores", [("3", [3]), ("1-3", [1, 2, 3]), ("0,2-3", [0, 2, 3]), (" 0 , 1 ", [0, 1])])
def test_parse_core_range(text, cores):
    assert parse_core_range(text) == cores


@pytest.mark.parametrize("text", ["", "a", "3-1", "-1", "0-", "1..3"])
def test_parse_core_range_refuses_other_forms(text):
    with pytest.raises(ValueError, match=r"NEURON_RT_VISIBLE_CORES=.*is not a core index or range: use e\.g\. '0'"):
        parse_core_range(text)


def test_detection_imports_nothing(monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "torch_neuronx", raising=False)
    detect({})
    assert "torch_neuronx" not in sys.modules and "torch_xla" not in sys.modules


def test_fingerprints_key_on_what_changes_the_neff(monkeypatch, tmp_path):
    """Issue 27 item 7: the trace route's key has the compiler and library versions, not the runtime
    library's dpkg version (a pip-only build container has none) nor trn1 vs trn1n (same chip, a plan
    has no collectives); the xla route on Neuron keys on neuronx-cc, libneuronxla, torch-neuronx and
    NEURON_CC_FLAGS, and appends --auto-cast=none, refusing another --auto-cast the user set."""
    from trnplan.backends import accel, neuron
    from trnplan.cache.fingerprint import fingerprint
    from trnplan.core.errors import PlanningError

    _packages(monkeypatch, torch_neuronx="2.9.0.2.15.32035", torch_xla="2.9.0", libneuronxla="2.2.14584.0",
              neuronx_cc="2.21.33363.0")
    monkeypatch.delenv("TRNPLAN_NEURON_TARGET", raising=False)
    keys = {}
    for family, runtime_lib in (("trn1", "2.27.23.0"), ("trn1n", None)):
        _chips(monkeypatch, tmp_path, 1, family)
        monkeypatch.setattr(neuron_runtime, "_runtime_lib_version", lambda v=runtime_lib: v)
        keys[family] = fingerprint("neuron")
        assert neuron.target() == "trn1"
    assert keys["trn1"] == keys["trn1n"] and keys["trn1"]["neuronx-cc"] == "2.21.33363.0"
    monkeypatch.setattr(accel, "pjrt_device", lambda: "NEURON")
    monkeypatch.setenv("PJRT_DEVICE", "NEURON")
    monkeypatch.setenv("NEURON_CC_FLAGS", "--model-type=transformer")
    assert accel.require_auto_cast_none() == "--model-type=transformer --auto-cast=none"
    fp = accel.backend_for("xla").fingerprint()
    assert (fp["neuronx-cc"], fp["libneuronxla"], fp["torch-neuronx"]) == ("2.21.33363.0", "2.2.14584.0",
                                                                           "2.9.0.2.15.32035")
    assert fp["neuron_cc_flags"] == "--model-type=transformer --auto-cast=none" and fp["pjrt_device"] == "NEURON"
    monkeypatch.setenv("NEURON_CC_FLAGS", "--auto-cast matmult")
    with pytest.raises(PlanningError, match=r"NEURON_CC_FLAGS='--auto-cast matmult' asks neuronx-cc to auto-cast "
                                            r"\(matmult\).*set --auto-cast=none there"):
        accel.require_auto_cast_none()
