"""Settings that can be overridden from the environment — all of them, read here and nowhere else.

One parsing rule, for every variable: surrounding whitespace is ignored; unset or empty means
the default; a switch takes ``0`` or ``1``, a count decimal digits only (a positive integer: no
sign, no ``_``, no exponent), a time a finite positive decimal number (no ``inf``/``nan``, no
``_``), a mode one of its listed words; anything else raises ValueError naming the variable, the
value and what it takes. :func:`check_environment` checks them all at once: every plan and every
command calls it first, so a bad value is refused when trnplan starts work, not when the feature
that reads it first runs (``import trnplan`` checks nothing: it must not fail on a setting).

Every setting, its default and its meaning are in :data:`SETTING_DOCS`, the one table: the
"Settings" table of docs/user-guide.md is generated from it (``python tools/check_settings.py
--write``), and ``make lint`` fails when the two differ or a doc names a ``TRNPLAN_*`` variable
that is not read here.
"""

from __future__ import annotations

import math
import os
import re

from trnplan.core import state

#: a count: decimal digits (int() would also take "1_0", "+5" and " 5 ")
_COUNT = re.compile(r"[0-9]+")
#: a time: a decimal number (float() would also take "inf", "nan" and "1_0")
_NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def _raw(name: str, environ=None) -> str:
    """The variable's value with surrounding whitespace removed ("" if unset)."""
    return (os.environ if environ is None else environ).get(name, "").strip()


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()  # _raw, written out: read on every plan
    if raw == "":
        return default
    if not _COUNT.fullmatch(raw) or int(raw) < 1:
        raise ValueError(f"environment variable {name}={os.environ[name]!r} must be a positive integer "
                         f"(decimal digits)")
    return int(raw)


def _number_env(name: str) -> float | None:
    """A finite positive number of seconds (unset or empty: None)."""
    raw = _raw(name)
    if raw == "":
        return None
    value = float(raw) if _NUMBER.fullmatch(raw) else -1.0
    if not (0 < value < math.inf):
        raise ValueError(f"environment variable {name}={os.environ[name]!r} must be a positive number of seconds")
    return value


def _flag_env(name: str, default: bool) -> bool:
    """A 0/1 switch (unset or empty: ``default``)."""
    raw = os.environ.get(name, "").strip()  # _raw, written out: read on every plan
    if raw == "":
        return default
    if raw not in ("0", "1"):
        raise ValueError(f"environment variable {name}={os.environ[name]!r} must be 0 or 1")
    return raw == "1"


def _word_env(name: str, words: tuple, default: str) -> str:
    """One of ``words`` (unset or empty: ``default``)."""
    raw = _raw(name)
    if raw == "":
        return default
    if raw not in words:
        raise ValueError(f"environment variable {name}={os.environ[name]!r} must be one of {', '.join(words)}")
    return raw


def _text_env(name: str) -> str | None:
    """A free-form value (a path, a target name); unset or empty (after stripping): None."""
    return _raw(name) or None


_plan_lru_size: int | None = None


def set_plan_cache_size(plans: int | None) -> None:
    """Bound the in-process cache of ready plans to ``plans`` (None: back to
    ``TRNPLAN_PLAN_LRU_SIZE``, default 256); the least recently used go first, at the next insert.
    The on-disk cache's bound is in bytes: ``PlanCache(path, size_limit=...)``."""
    global _plan_lru_size
    if plans is not None and (isinstance(plans, bool) or not isinstance(plans, int) or plans < 1):
        raise ValueError(f"the plan cache size must be a positive number of plans or None; got {plans!r}")
    _plan_lru_size = plans


def plan_lru_size() -> int:
    """Ready plans the in-process cache keeps (:func:`set_plan_cache_size`, else the environment)."""
    return _plan_lru_size if _plan_lru_size is not None else _int_env("TRNPLAN_PLAN_LRU_SIZE", 256)


def wisdom_only() -> bool:
    """``TRNPLAN_WISDOM_ONLY=1``: the whole process behaves as ``effort="wisdom_only"``."""
    return _flag_env("TRNPLAN_WISDOM_ONLY", False)


def dropin_search() -> bool:
    """``TRNPLAN_DROPIN_SEARCH=1``: the drop-in front ends (trnplan.fft, trnplan.stft) plan a shape
    they have not seen with plan_many's full estimate and store it, instead of the cheap path
    (stored wisdom where there is some, else the device's own FFT, nothing written to disk)."""
    return _flag_env("TRNPLAN_DROPIN_SEARCH", False)


def cache_dir() -> str | None:
    """``TRNPLAN_CACHE_DIR``: the on-disk plan cache's directory (None: the default, see
    :func:`trnplan.cache.default_cache_dir`)."""
    return _text_env("TRNPLAN_CACHE_DIR")


def trust_cache() -> bool:
    """``TRNPLAN_TRUST_CACHE=1``: load artifacts even from a cache directory other users can write."""
    return _flag_env("TRNPLAN_TRUST_CACHE", False)


def recheck() -> bool:
    """``TRNPLAN_RECHECK=0``: reuse measured wisdom without the spot check (default 1: a measured
    record's winner is timed once per process against the default, and re-measured if it lost)."""
    return _flag_env("TRNPLAN_RECHECK", True)


def run_queue() -> bool:
    """``TRNPLAN_RUN_QUEUE=0``: adaptive thread counts and measured planning ignore this machine's
    run queue (``/proc/loadavg``: :mod:`trnplan.kernels.hostlib.occupancy`) and judge by times alone."""
    return _flag_env("TRNPLAN_RUN_QUEUE", True)


def neuron_target() -> str | None:
    """``TRNPLAN_NEURON_TARGET``: neuronx-cc's ``--target`` (None: from the instance)."""
    return _text_env("TRNPLAN_NEURON_TARGET")


def neuron_cpu_backend() -> bool:
    """``TRNPLAN_NEURON_CPU_BACKEND=1``: trace with ``cpu_backend=True`` (no NeuronCore needed)."""
    return _flag_env("TRNPLAN_NEURON_CPU_BACKEND", False)


def neuron_host_fallback() -> bool:
    """``TRNPLAN_NEURON_HOST_FALLBACK=1``: a NEFF that fails to build runs on the host instead of raising."""
    return _flag_env("TRNPLAN_NEURON_HOST_FALLBACK", False)


def neuron_device_files(environ=None) -> str | None:
    """``TRNPLAN_NEURON_DEVICE_FILES``: a glob for the Neuron device files (None: ``/dev/neuron[0-9]*``)."""
    return _raw("TRNPLAN_NEURON_DEVICE_FILES", environ) or None


def neuron_probe() -> bool:
    """``TRNPLAN_NEURON_PROBE=0``: assume the NeuronCore precision probe's result instead of running it."""
    return _flag_env("TRNPLAN_NEURON_PROBE", True)


#: effort → default time limit (s) of measured planning, when neither set_timelimit() nor
#: TRNPLAN_TIMELIMIT says otherwise
DEFAULT_TIMELIMIT = {"measure": 5.0, "patient": 30.0}
_timelimit: float | None = None


def set_timelimit(seconds: float | None) -> None:
    """Bound the time measured planning spends timing candidates, as FFTW's ``fftw_set_timelimit``.

    Parameters
    ----------
    seconds : float or None
        A positive number of seconds, or ``None`` to go back to the default (``TRNPLAN_TIMELIMIT``,
        else 5 s for effort "measure" and 30 s for "patient"). It covers the candidates' work:
        preparing each (lowering, the warm-up and error check) and timing them round-robin; a
        candidate is prepared only while its preparing and its minimum rounds still fit. FFTW's
        own planning of pyFFTW leaves (FFTW_MEASURE) has a budget of its own
        (:func:`fftw_timelimit`), which is this limit where only this one is set. It does not
        cover the cost-model search before (milliseconds) or storing the result after. The
        model's pick and the device's own FFT are always timed (at least 5 rounds each), so a
        limit shorter than that is overrun by them. Measured on a busy 2-core machine at a 2 s
        limit: 1.2-2.0 s (7.4 s before).
    """
    global _timelimit
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                or not seconds > 0):
        raise ValueError(f"the time limit must be a positive number of seconds or None; got {seconds!r}")
    _timelimit = None if seconds is None else float(seconds)


def timelimit(effort: str) -> float:
    """Seconds effort ``effort`` may spend timing candidates (see :func:`set_timelimit`)."""
    if _timelimit is not None:
        return _timelimit
    value = _number_env("TRNPLAN_TIMELIMIT")
    return value if value is not None else DEFAULT_TIMELIMIT.get(effort, DEFAULT_TIMELIMIT["measure"])


#: effort → default seconds FFTW's own planner (FFTW_MEASURE) may spend on the pyFFTW leaves of one
#: measured planning, beside the time limit. FFTW_MEASURE cut short by a time limit returns about
#: its estimate's plan: on this 2-vCPU machine an unbounded FFTW_MEASURE of n = 262144 took 5.0 s
#: at two threads (3.3 s at one) and its plan ran 471 µs (778 µs at one thread), where any limit
#: from 0.01 to 2.5 s gave a plan of 720 µs (1395 µs at one); 16×4099: 1.1 s, 361 µs, against 477 µs
#: at a 1 s limit (2026-11-27). The candidates' FFTW plans had the time limit's remains before, so
#: a measured plan's pyFFTW leaf ran up to 1.8× the user's own FFTW_MEASURE plan.
DEFAULT_FFTW_TIMELIMIT = {"measure": 10.0, "patient": 60.0}


def fftw_timelimit(effort: str) -> float:
    """Seconds FFTW's own planner (FFTW_MEASURE) may spend on the pyFFTW leaves of one measured
    planning of effort ``effort``, not counted in :func:`timelimit`: ``TRNPLAN_FFTW_TIMELIMIT``, else
    the time limit where the user set it (:func:`set_timelimit`, ``TRNPLAN_TIMELIMIT``), else
    :data:`DEFAULT_FFTW_TIMELIMIT` (10 s for "measure", 60 s for "patient")."""
    value = _number_env("TRNPLAN_FFTW_TIMELIMIT")
    if value is not None:
        return value
    if _timelimit is not None or _number_env("TRNPLAN_TIMELIMIT") is not None:
        return timelimit(effort)
    return DEFAULT_FFTW_TIMELIMIT.get(effort, DEFAULT_FFTW_TIMELIMIT["measure"])


def measure_top_k() -> int:
    """How many candidate trees effort "measure" times: the cost model's best K (default 6)."""
    return _int_env("TRNPLAN_MEASURE_TOP_K", 6)


#: torch.compile's modes (torch.compile(mode=...)); "default" is torch's own default
INDUCTOR_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def inductor_mode() -> str | None:
    """``TRNPLAN_INDUCTOR_MODE``: the ``torch.compile`` mode of ``compile="inductor"`` plans (None: torch's default)."""
    mode = _word_env("TRNPLAN_INDUCTOR_MODE", INDUCTOR_MODES, "default")
    return None if mode == "default" else mode


def aot_load_check() -> str:
    """``TRNPLAN_AOT_LOAD_CHECK``: "auto" (the backend decides), "1" (always, and check again
    where a failed check is remembered) or "0" (never)."""
    return _word_env("TRNPLAN_AOT_LOAD_CHECK", ("auto", "0", "1"), "auto")


def install_devices(environ=None) -> list[str] | None:
    """``TRNPLAN_INSTALL``: None (unset, empty or 0: do not install), ``[]`` (1: the default
    devices) or the listed device kinds (``xla,neuron``)."""
    raw = _raw("TRNPLAN_INSTALL", environ)
    if raw in ("", "0"):
        return None
    if raw == "1":
        return []
    kinds = [k.strip() for k in raw.split(",") if k.strip()]
    if not kinds or any(not k.replace("_", "").isalnum() for k in kinds):
        raise ValueError(f"environment variable TRNPLAN_INSTALL={raw!r} must be 0, 1 or a comma-separated list of "
                         f"device kinds (e.g. xla,neuron)")
    return kinds


def pjrt_device() -> str | None:
    """``PJRT_DEVICE`` (torch-xla's device: CPU, TPU, CUDA, NEURON), upper-cased; None when unset."""
    return os.environ.get("PJRT_DEVICE", "").strip().upper() or None


#: every variable trnplan reads, with the function that parses it (check_environment calls each)
SETTINGS = {
    "TRNPLAN_PLAN_LRU_SIZE": plan_lru_size,
    "TRNPLAN_CACHE_DIR": cache_dir,
    "TRNPLAN_WISDOM_ONLY": wisdom_only,
    "TRNPLAN_DROPIN_SEARCH": dropin_search,
    "TRNPLAN_TRUST_CACHE": trust_cache,
    "TRNPLAN_RECHECK": recheck,
    "TRNPLAN_RUN_QUEUE": run_queue,
    "TRNPLAN_TIMELIMIT": lambda: _number_env("TRNPLAN_TIMELIMIT"),
    "TRNPLAN_FFTW_TIMELIMIT": lambda: _number_env("TRNPLAN_FFTW_TIMELIMIT"),
    "TRNPLAN_MEASURE_TOP_K": measure_top_k,
    "TRNPLAN_INDUCTOR_MODE": inductor_mode,
    "TRNPLAN_AOT_LOAD_CHECK": aot_load_check,
    "TRNPLAN_NEURON_TARGET": neuron_target,
    "TRNPLAN_NEURON_CPU_BACKEND": neuron_cpu_backend,
    "TRNPLAN_NEURON_PROBE": neuron_probe,
    "TRNPLAN_NEURON_HOST_FALLBACK": neuron_host_fallback,
    "TRNPLAN_NEURON_DEVICE_FILES": neuron_device_files,
    "TRNPLAN_INSTALL": install_devices,
}
#: every setting's default and meaning (Markdown), in :data:`SETTINGS`' order: the one table of
#: them, rendered by :func:`settings_table` into docs/user-guide.md ("Settings")
SETTING_DOCS = {
    "TRNPLAN_PLAN_LRU_SIZE": ("256", ("ready plans kept by the in-process plan cache; `trnplan.set_plan_cache_size()` "
                              "overrides it")),
    "TRNPLAN_CACHE_DIR": ("`~/.cache/trnplan`", "the on-disk plan cache (else `$XDG_CACHE_HOME/trnplan`)"),
    "TRNPLAN_WISDOM_ONLY": ("0", ("1: every `plan_many` behaves as `effort=\"wisdom_only\"`: never plan or compile, a "
                            "cache miss is an error")),
    "TRNPLAN_DROPIN_SEARCH": ("0", ("1: the drop-in (`trnplan.fft`, `trnplan.stft`) plans a new shape with the full "
                              "estimate and stores it; 0: stored wisdom, else the device's own FFT, nothing written")),
    "TRNPLAN_TRUST_CACHE": ("0", "1: load artifacts even from a cache directory other users can write"),
    "TRNPLAN_RECHECK": ("1", "0: reuse measured wisdom without the once-per-process spot check against the default"),
    "TRNPLAN_RUN_QUEUE": ("1", ("0: adaptive thread counts and measured planning judge by times alone, not by the "
                          "run queue (`/proc/loadavg`: whether another process holds a core)")),
    "TRNPLAN_TIMELIMIT": ("5 (measure), 30 (patient)", ("seconds measured planning may spend timing candidates (FFTW's "
                          "`fftw_set_timelimit`); `trnplan.set_timelimit()` overrides it")),
    "TRNPLAN_FFTW_TIMELIMIT": ("10 (measure), 60 (patient)", ("seconds FFTW's own planner (FFTW_MEASURE) may spend on "
                               "the pyFFTW leaves of one measured planning, beside `TRNPLAN_TIMELIMIT` (where only "
                               "that limit is set, this one is the same); a plan cut short runs up to 1.8× slower")),
    "TRNPLAN_MEASURE_TOP_K": ("6", ("how many candidate trees `effort=\"measure\"` times beyond the model's pick and "
                              "the default")),
    "TRNPLAN_INDUCTOR_MODE": ("torch's default", ("the `torch.compile` mode of `compile=\"inductor\"` plans, e.g. "
                              "`max-autotune-no-cudagraphs`; under the CUDA-graph modes (`reduce-overhead`, "
                              "`max-autotune`) each call's outputs are copied out of the graph's memory")),
    "TRNPLAN_AOT_LOAD_CHECK": ("auto", ("load each new AOT package in a child process first (auto: on CUDA, where "
                               "loading has crashed; 1: on every backend, and check again where a failure is "
                               "remembered; 0: never). See docs/cache.md, \"Safety\"")),
    "TRNPLAN_NEURON_TARGET": ("the instance family", ("neuronx-cc `--target` (trn1, trn1n, trn2, inf2); required on a "
                              "build host (no NeuronCore); see docs/trainium.md")),
    "TRNPLAN_NEURON_CPU_BACKEND": ("0", ("1: build only: trace Neuron plans with `cpu_backend=True` and load nothing "
                                   "here, on a host without a NeuronCore (needs `TRNPLAN_NEURON_TARGET`)")),
    "TRNPLAN_NEURON_PROBE": ("1", "0: assume the NeuronCore precision probe's result instead of running it"),
    "TRNPLAN_NEURON_HOST_FALLBACK": ("0", ("1: a NEFF that fails to build runs eagerly on the host, with a warning "
                                     "(else the build failure raises)")),
    "TRNPLAN_NEURON_DEVICE_FILES": ("`/dev/neuron[0-9]*`", ("where the Neuron driver's device files are (a glob): a "
                                    "container that maps them elsewhere")),
    "TRNPLAN_INSTALL": ("0", ("1: `trnplan.install()` at `import trnplan` and, through trnplan's `torch.backends` entry "
                        "point, at `import torch`: torch.fft/stft on `xla` and PrivateUse1 tensors run trnplan plans "
                        "(code you cannot edit); or a comma-separated list of device kinds (`xla,neuron`). See "
                        "docs/trainium.md")),
}


def settings_table() -> str:
    """:data:`SETTING_DOCS` as a Markdown table (docs/user-guide.md's "Settings")."""
    rows = [f"| `{name}` | {default} | {meaning} |" for name, (default, meaning) in SETTING_DOCS.items()]
    return "\n".join(["| variable | default | meaning |", "|---|---|---|", *rows]) + "\n"


_checked: tuple | None = None


def check_environment() -> tuple:
    """Parse every ``TRNPLAN_*`` setting (:data:`SETTINGS`); raise ValueError for the first bad one.

    Called at the start of every plan (``plan_many``) and every ``trnplan`` command. The values
    last found good are remembered, so an unchanged environment costs one dictionary read per
    setting (and no Python call: ``map`` over ``os.environ.get``). Returns those values (plan_many
    names a request by them: another environment is another request).
    """
    global _checked
    values = tuple(map(os.environ.get, SETTINGS))
    if values == _checked:
        return values
    for parse in SETTINGS.values():
        parse()
    _checked = values
    return values


def _reset() -> None:
    """A fresh process's settings: no set_plan_cache_size / set_timelimit, nothing checked yet."""
    global _plan_lru_size, _timelimit, _checked
    _plan_lru_size = _timelimit = _checked = None


state.register("core.config", _reset)
