"""Interfaces for code written against scipy.fft and numpy.fft, with numpy arrays in and out.

- :mod:`trnplan.interfaces.scipy_fft` is a scipy.fft backend (the uarray protocol)::

      import scipy.fft, trnplan.interfaces.scipy_fft
      with scipy.fft.set_backend(trnplan.interfaces.scipy_fft):
          y = scipy.fft.fft2(x)          # runs a trnplan plan

- :mod:`trnplan.interfaces.numpy_fft` has numpy.fft's functions, signatures and dtype rules,
  as pyFFTW's ``pyfftw.interfaces.numpy_fft`` does::

      from trnplan.interfaces import numpy_fft as fft
      y = fft.rfftn(x)

Both convert numpy arrays to CPU tensors without copying where the layout allows, run the
transform through :mod:`trnplan.fft` (so plans come from the process-wide plan cache), and hand
back a numpy array.
"""

from trnplan.interfaces import numpy_fft, scipy_fft

__all__ = ["numpy_fft", "scipy_fft"]
