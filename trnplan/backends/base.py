"""The backend protocol: what the planner and Plan need to know about a device kind.

A backend knows whether it can run here (:meth:`unavailable_reason`), whether it has a native
FFT (:meth:`has_native_fft`), its cost profile (:attr:`profile`), its fingerprint (what a plan
or an artifact depends on), and how to turn a device string into a ``torch.device``. Turning a
lowered module into an artifact (AOTInductor ``.pt2`` / NEFF) is the plan-cache issue's seam:
in this version every backend runs the lowered module eagerly.
"""

from __future__ import annotations

import platform

import torch

from trnplan.planner.cost import CostProfile


class Backend:
    kind: str = ""
    profile: CostProfile

    def unavailable_reason(self) -> str | None:
        """``None`` if this backend can run on this machine, else why not and what to do."""
        return None

    def has_native_fft(self, precision: str) -> bool:
        return False

    def torch_device(self, device) -> torch.device:
        return torch.device(device)

    def fingerprint(self) -> dict:
        """Facts a plan depends on; the on-disk cache keys wisdom and artifacts on them."""
        return {"kind": self.kind, "torch": torch.__version__, "machine": platform.machine()}
