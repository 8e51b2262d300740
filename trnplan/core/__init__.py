"""The bottom layer: values and models every other layer uses, importing nothing above them.

errors (the exception hierarchy), config (every ``TRNPLAN_*`` setting), problem (what to
compute), cost (the cost model and the price of each precision mode), accuracy (the error
model, the engine's bar and the float64 reference it is measured against), node (the plan tree
as data), spec (strategy s-expressions). See docs/architecture.md for the layers.
"""
