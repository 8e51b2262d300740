"""The Neuron (Trainium) backend seam: planning works, execution arrives with the Trainium issue.

NeuronCores have no complex dtype (NCC_EVRF004), no ``aten::fft_*``, no fp64, and pay ~0.7 ms
per dispatch (../shared/FACTS.md), so the profile has no native FFT and a dispatch cost three
orders above the CPU's: the planner prefers few, large GEMMs there. The numbers are the seed
project's trn1 measurements; none of this has run on Trainium in this version.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util

from trnplan.backends.base import Backend, PrecisionProbe
from trnplan.planner.cost import CostProfile

NEURON_PROFILE = CostProfile(
    name="neuron",
    launch_us=670.0,
    # trn1: 190 bf16 vs 47.5 fp32 TFLOP/s per chip (../shared/FACTS.md): bf16 is 4× the fp32 rate
    gemm_gflops={"float32": 20000.0, "bfloat16": 80000.0},
    fft_gflops={},
    bandwidth_gbs=400.0,
    source="seed project trn1 figures (../shared/FACTS.md); not measured by trnplan",
)


class NeuronBackend(Backend):
    kind = "neuron"
    profile = NEURON_PROFILE

    def unavailable_reason(self) -> str | None:
        if importlib.util.find_spec("torch_neuronx") is None:
            return ("device='neuron' needs torch-neuronx and neuronx-cc (AWS's Neuron SDK, on a trn1/trn2 "
                    "instance); they are not installed here. Use device='cpu', or run on Trainium")
        return ("device='neuron' execution is not built yet in this version of trnplan (the Trainium "
                "backend issue adds NEFF artifacts); plan with trnplan.Planner(get_backend('neuron')) "
                "to see the tree it would use")

    def has_native_fft(self, precision: str) -> bool:
        return False  # aten::fft_* is unsupported by neuronx-cc

    def _probe(self, device):
        # not run on Trainium in this version: the seed project measured its Ozaki (split bf16)
        # modes at 1.7e-3 on trn1 and trn2, no better than plain bf16 (products are rounded before
        # PSUM accumulation), and fp32 matmuls stay fp32 with --auto-cast none (../shared/FACTS.md)
        return PrecisionProbe(False, "fp32", "assumed from the seed project's trn1/trn2 measurements; "
                                             "not probed on a NeuronCore")

    artifact_modes = ("neuron",)

    def auto_compile(self):
        return "neuron", "a NEFF is the only way to run on a NeuronCore"

    def build_artifact(self, module, example, mode):
        from trnplan.backends import artifacts

        return artifacts.neuron_compile(module, example), {"dynamic_batch": False}

    def load_artifact(self, data, mode, device):
        from trnplan.backends import artifacts

        return artifacts.TorchScriptRunner(data)

    def fingerprint(self) -> dict:
        fp = super().fingerprint()
        for dist in ("neuronx-cc", "torch-neuronx"):
            try:
                fp[dist] = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                fp[dist] = "absent"
        return fp
