"""trnplan.fft: torch.fft's functions over cached trnplan plans — change one import, keep the code.

Every transform here has torch.fft's signature and semantics (``n``/``s`` zero-pad or crop,
``dim`` any/negative/non-last, ``norm``, dtype promotion, ``out=``) and runs as one
:class:`~trnplan.plan.plan.Plan` from the process-wide plan cache: the transformed dimensions are
moved to the end, every other dimension becomes the plan's batch, the plan runs, and the
dimensions are moved back. A second call with the same shape, dtype, norm and device reuses the
same plan without planning again. Results are differentiable (the plan's backward pass runs the
adjoint transform as another cached plan).

Each transform is also a torch operator, ``trnplan::fft_<name>`` with torch.fft's schema, so that
``torch.jit.script`` compiles calls to these functions and ``torch.jit.trace`` records one node per
transform; ``torch.compile(fullgraph=True)`` and ``torch.export`` trace them into one opaque
``trnplan::execute`` node per plan (see "torch operators" below).

Argument handling follows ATen's ``SpectralOps.cpp`` (``canonicalize_fft_shape_and_dim_args``,
``resize_fft_input``, ``promote_tensor_fft``) so that errors come with the same exception
classes as torch.fft; the messages also say how to fix the call.

Where this module differs from torch.fft (on purpose):

- a batch with no transforms (a leading dimension of size 0) returns an empty result of the
  right shape and dtype; torch.fft on the CPU raises an MKL error there;
- float16, bfloat16 and complex32 inputs raise :class:`UnsupportedDtypeError` (a ``TypeError``
  and a ``RuntimeError``, like torch's own "Unsupported dtype Half" on the CPU), because trnplan
  plans compute in float32 or float64: convert with ``x.float()`` (``x.to(torch.complex64)``).

The Hermitian transforms follow from the real ones: ``hfftn(x, norm) = irfftn(conj(x),
mirror(norm))`` and ``ihfftn(x, norm) = conj(rfftn(x, mirror(norm)))``, where ``mirror`` swaps
"backward" and "forward" (the direction of the exponent flips, so does the side that is scaled).

Layout (one job per module, as scipy.fft's ``_basic``/``_realtransforms``/``_helper``):

- :mod:`~trnplan.fft._basic` — torch.fft's functions (``fft`` … ``ihfftn``, ``fftfreq``,
  ``fftshift``), each one line into the dispatch, and their docstrings (templates in ``_docs``);
- :mod:`~trnplan.fft._realtransforms` — ``dct``/``dst`` and their inverses and N-D forms;
- :mod:`~trnplan.fft._truncated` — ``rfftn_truncated``/``irfftn_truncated``;
- :mod:`~trnplan.fft._dropin` — the dispatch: a seen call's shortcut to its plan, the full path
  of each family (c2c, r2c, c2r), the ``trnplan::fft_<name>`` operators;
- :mod:`~trnplan.fft._engine` — one plan over chosen dimensions (the plan cache call), and the
  ``trnplan::execute`` operator that ``torch.compile`` sees;
- :mod:`~trnplan.fft._args` — argument handling (dims, lengths, promotion, ``out=``).

Imports point down that list (an import-linter contract in pyproject.toml).

References
----------
.. [1] PyTorch, ``torch.fft`` and ``aten/src/ATen/native/SpectralOps.cpp``.
.. [2] J. W. Cooley and J. W. Tukey, "An algorithm for the machine calculation of complex
       Fourier series", Math. Comp. 19 (1965), 297–301.
"""

from __future__ import annotations

from trnplan.core.errors import UnsupportedDtypeError
from trnplan.fft._basic import (
    fft,
    fft2,
    fftfreq,
    fftn,
    fftshift,
    hfft,
    hfft2,
    hfftn,
    ifft,
    ifft2,
    ifftn,
    ifftshift,
    ihfft,
    ihfft2,
    ihfftn,
    irfft,
    irfft2,
    irfftn,
    rfft,
    rfft2,
    rfftfreq,
    rfftn,
)
from trnplan.fft._dropin import _IMPLS, register_ops
from trnplan.fft._realtransforms import dct, dctn, dst, dstn, idct, idctn, idst, idstn
from trnplan.fft._truncated import irfftn_truncated, rfftn_truncated

__all__ = [
    "UnsupportedDtypeError",
    "dct",
    "dctn",
    "dst",
    "dstn",
    "fft",
    "fft2",
    "fftfreq",
    "fftn",
    "fftshift",
    "hfft",
    "hfft2",
    "hfftn",
    "idct",
    "idctn",
    "idst",
    "idstn",
    "ifft",
    "ifft2",
    "ifftn",
    "ifftshift",
    "ihfft",
    "ihfft2",
    "ihfftn",
    "irfft",
    "irfft2",
    "irfftn",
    "irfftn_truncated",
    "rfft",
    "rfft2",
    "rfftfreq",
    "rfftn",
    "rfftn_truncated",
]

register_ops({name: globals()[name] for name in _IMPLS})
