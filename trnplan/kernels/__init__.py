"""Split-complex building blocks shared by the solvers.

Everything inside the engine is a pair of real tensors ``(re, im)``: Trainium has no
complex dtype (neuronx-cc NCC_EVRF004) and Inductor cannot generate code for complex
ops, so complex numbers only exist at the public boundary.
"""

from trnplan.kernels.complex import cmul, fused_complex_matrix
from trnplan.kernels.twiddle import chirp, dft_matrix, twiddle_table

__all__ = ["chirp", "cmul", "dft_matrix", "fused_complex_matrix", "twiddle_table"]
