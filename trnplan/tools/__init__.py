"""trnplan's tools: the front-layer modules that are not the public transform API.

``cli`` (the ``trnplan`` command), ``precompile`` (manifests into a plan cache; ``trnplan.precompile``
is re-exported at the package root), ``calibrate`` (time the host leaves and fit the CPU cost
model), ``benchsuite`` (``trnplan bench``), ``audit`` (the Neuron lowering audit) and ``xla_audit``
(the HLO/StableHLO audit on torch-xla). They sit in the front layer of the import contract
(pyproject.toml) beside trnplan.fft, trnplan.stft and trnplan.distributed; nothing below the
front imports them. This package imports none of them itself: ``import trnplan`` stays cheap.
"""
