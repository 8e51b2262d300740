"""Data files shipped with the backends: the Neuron audit's ATen allowlist and neuronx-cc's XLA
operator list, both tab-separated tables read by :func:`read_table`."""

from __future__ import annotations

import importlib.resources


def read_table(name: str) -> dict[str, str]:
    """``{first column: second column}`` of the tab-separated data file ``name`` (both stripped; a
    missing second column is ""; blank lines and ``#`` comments skipped; further columns are notes
    for readers of the file)."""
    text = importlib.resources.files(__name__).joinpath(name).read_text()
    out = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, rest = line.partition("\t")
            out[key.strip()] = rest.split("\t", 1)[0].strip()
    return out
