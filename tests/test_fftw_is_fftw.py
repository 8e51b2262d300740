"""pyFFTW's calls are FFTW's, also after MKL ran in the process (hostlib.fftw.import_pyfftw).

MKL's FFTW3 wrappers carry FFTW's C names; once MKL's first call (mkl_fft's) has made them global
symbols, a pyFFTW extension imported the usual way binds to them and computes MKL's transform
(measured: MKL's single-transform error at 17357 points, 13.6 u·√log2 n, and no wisdom). Each case
runs in a fresh interpreter: which library a symbol binds to is fixed for the process.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pyfftw")
pytest.importorskip("mkl_fft")

#: a fresh process: one mkl_fft call first (MKL's layers load, their symbols global), then ``body``
PRELUDE = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
import numpy as np, torch, mkl_fft, trnplan
from trnplan.kernels import hostlib
from support import BAR, reference, rel_l2, random_complex
mkl_fft.fft(np.ones(8, np.complex64))
"""


def _run(body: str) -> str:
    done = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_pyfftw_leaf_is_fftw_after_mkl_ran():
    """trnplan imports pyFFTW bound to its own FFTW: FFTW's wisdom, and FFTW's accuracy on one
    transform of 17357 points (where MKL's is 27× fp32's bar)."""
    out = _run("""
        plan = trnplan.plan_many((17357,), batch=1, strategy="pyfftw", cache=None)
        x = torch.from_numpy(random_complex((1, 17357), seed=3)).to(torch.complex64)
        err = rel_l2(plan.execute(x), reference(x))
        wisdom = hostlib.library_module("pyfftw").export_wisdom()
        print(err <= BAR["fp32"], all(w.startswith(b"(fftw-") for w in wisdom[:2]), err)
    """)
    assert out.split()[:2] == ["True", "True"], out


def test_pyfftw_imported_after_mkl_by_other_code_is_refused_with_the_reason():
    """A pyFFTW the caller imported after MKL ran is MKL's: trnplan leaves it out, and says why and the fix."""
    out = _run("""
        import warnings
        import pyfftw  # the caller's import: bound to MKL's wrappers
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            assert hostlib.library_module("pyfftw") is None
        assert any("MKL's FFTW3 wrappers" in str(w.message) for w in said), [str(w.message) for w in said]
        assert hostlib.installed("pyfftw") is None and hostlib.not_itself("pyfftw")
        try:
            trnplan.plan_many((64,), batch=2, strategy="pyfftw", cache=None)
        except trnplan.PlanningError as exc:
            print("REFUSED", "MKL's FFTW3 wrappers" in str(exc), "import pyfftw first" in str(exc))
        plan = trnplan.plan_many((64,), batch=2, cache=None)
        print("DEFAULT", "pyfftw" not in str(plan.tree))
    """)
    assert "REFUSED True True" in out and "DEFAULT True" in out, out
