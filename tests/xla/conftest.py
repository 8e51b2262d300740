"""The torch-xla lane's fixtures (.ci/xla_lane.sh runs these tests on torch 2.9 + torch-xla 2.9).

Outside the lane (torch 2.13 without torch-xla) every test here is skipped at collection. Inside
it (``TRNPLAN_XLA_LANE_RUNNING=1``) a missing torch-xla is an import error, never a skip: a lane
that tests nothing must not pass.
"""

from __future__ import annotations

import os

import pytest

if os.environ.get("TRNPLAN_XLA_LANE_RUNNING") == "1":
    import torch_xla  # noqa: F401 - the lane must fail loudly without it
else:
    pytest.importorskip("torch_xla", reason="torch-xla is not installed here; .ci/xla_lane.sh runs these tests")

os.environ.setdefault("PJRT_DEVICE", "CPU")
