"""Data files shipped with the backends (the Neuron audit allowlist)."""
