"""The backend protocol: what the planner and Plan need to know about a device kind.

A backend knows whether it can run here (:meth:`unavailable_reason`), whether it has a native
FFT (:meth:`has_native_fft`), its cost profile (:attr:`profile`), its fingerprint (what a plan
or an artifact depends on), which artifact kinds it builds (:meth:`resolve_compile`), and how
to build a lowered module into artifact bytes and load them back without recompiling
(:meth:`build_artifact`, :meth:`load_artifact`; see :mod:`trnplan.backends.artifacts`).
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

    # ------------------------------------------------------------------ artifacts
    #: the artifact kinds this backend can build, besides "eager" (none)
    artifact_modes: tuple[str, ...] = ("aot",)

    def resolve_compile(self, compile: str) -> tuple[str, str]:
        """(mode, why) for ``plan_many(compile=...)``: "auto" picks per backend."""
        if compile == "auto":
            return self.auto_compile()
        if compile != "eager" and compile not in self.artifact_modes:
            known = ", ".join(("auto", "eager", *self.artifact_modes))
            raise ValueError(f"compile={compile!r} is not available on {self.kind}; use one of {known}")
        return compile, "asked for"

    def auto_compile(self) -> tuple[str, str]:
        return "eager", "no artifact kind pays on this backend"

    def build_artifact(self, module, example, mode: str) -> tuple[bytes, dict]:
        """Compile a lowered module to artifact bytes; returns (bytes, facts about it)."""
        from trnplan.backends import artifacts

        data, dynamic = artifacts.aot_compile(module, example)
        return data, {"dynamic_batch": dynamic}

    def load_artifact(self, data: bytes, mode: str, device: torch.device):
        """A callable (re, im) -> (re, im) running the artifact, without recompiling."""
        from trnplan.backends import artifacts

        return artifacts.AOTRunner(data, device)

    def fingerprint(self) -> dict:
        """Facts a plan or an artifact depends on; the plan cache keys wisdom and artifacts on them."""
        return {"machine": platform.machine()}
