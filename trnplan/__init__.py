"""trnplan: a plan-and-execute FFT engine for matrix-engine accelerators.

>>> import torch, trnplan
>>> plan = trnplan.plan_many((4096,), batch=64)
>>> y = plan.execute(torch.randn(64, 4096, dtype=torch.complex64))
>>> print(plan.explain())  # doctest: +SKIP
"""

from trnplan import (
    distributed,  # trnplan.distributed.plan_many: FFTs over torch.distributed
    fft,  # the torch.fft-compatible functions: trnplan.fft.fft(x), ...
)
from trnplan._version import __version__
from trnplan.backends import get_backend
from trnplan.cache import PlanCache, set_default_cache
from trnplan.cache.bundle import export_wisdom, import_wisdom
from trnplan.core.config import set_plan_cache_size, set_timelimit
from trnplan.core.errors import (
    BackendUnavailable,
    CompileError,
    ComplexOnDevice,
    NotSupportedYet,
    PlanningError,
    TrnplanError,
    WisdomMiss,
)
from trnplan.core.node import PlanNode
from trnplan.core.problem import Problem
from trnplan.dispatch import install, install_from_env, installed, uninstall
from trnplan.kernels.hostlib.memory import tune_malloc
from trnplan.plan import Plan, clear_plan_cache, plan_cache_info, plan_many
from trnplan.planner import SOLVERS, Planner, solver_names
from trnplan.stft import istft, stft
from trnplan.tools.precompile import precompile

# the Neuron runtimes' compile caches are not touched at import: the first Neuron plan points them at
# its own plan cache (backends/accel.configure_compile_cache; issue 27 item 4)
# TRNPLAN_INSTALL=1 (or a list of device kinds): torch.fft on xla / PrivateUse1 tensors runs trnplan plans
install_from_env()

__all__ = [
    "SOLVERS",
    "BackendUnavailable",
    "CompileError",
    "ComplexOnDevice",
    "NotSupportedYet",
    "Plan",
    "PlanCache",
    "PlanNode",
    "Planner",
    "PlanningError",
    "Problem",
    "TrnplanError",
    "WisdomMiss",
    "__version__",
    "clear_plan_cache",
    "distributed",
    "export_wisdom",
    "fft",
    "get_backend",
    "import_wisdom",
    "install",
    "installed",
    "istft",
    "plan_cache_info",
    "plan_many",
    "precompile",
    "set_default_cache",
    "set_plan_cache_size",
    "set_timelimit",
    "solver_names",
    "stft",
    "tune_malloc",
    "uninstall",
]
