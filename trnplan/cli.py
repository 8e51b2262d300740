"""The ``trnplan`` command moved to :mod:`trnplan.tools.cli`; this name stays for console scripts
installed before the move (their entry point reads ``trnplan.cli:main``)."""

from trnplan.tools.cli import main

__all__ = ["main"]
