"""torch's ``torch.backends`` entry point for trnplan: ``TRNPLAN_INSTALL=1 python their_script.py``.

torch ≥ 2.5 loads every ``torch.backends`` entry point at ``import torch``
(``TORCH_DEVICE_BACKEND_AUTOLOAD``, default 1; the mechanism TorchNeuron autoloads by). This
package is that entry point, kept apart from ``trnplan`` so that a process which does not ask
for trnplan pays one environment look-up, not trnplan's import: only when ``TRNPLAN_INSTALL``
is set (and not ``0``) does it import trnplan, whose import then calls
:func:`trnplan.install_from_env` (the variable's meaning is parsed there, in
``trnplan.core.config``).
"""

from __future__ import annotations

import os


def autoload() -> None:
    """Import trnplan (which installs its kernels) when ``TRNPLAN_INSTALL`` asks for it."""
    if os.environ.get("TRNPLAN_INSTALL", "").strip() not in ("", "0"):
        import trnplan  # noqa: F401 - its import runs install_from_env()
