"""Sphinx configuration of trnplan's API reference, generated from the docstrings (numpydoc style).

Built by `make docs` (and .ci/run) with warnings as errors:
``python -m sphinx -W --keep-going -b html docs/api build/docs-api``.
"""

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(__file__, "..", "..", "..")))  # the checkout's trnplan

import trnplan  # noqa: E402

project = "trnplan"
release = version = trnplan.__version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": False}
# the signatures name torch and numpy types that this reference does not document
nitpicky = False
html_theme = "alabaster"
exclude_patterns = ["_build"]
