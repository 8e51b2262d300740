"""The Neuron lowering audit moved to :mod:`trnplan.tools.audit`; ``from trnplan.audit import audit``
(docs/trainium.md before the move) keeps working."""

from trnplan.tools.audit import AuditReport, Finding, allowlist, audit, audit_graph, audit_grid

__all__ = ["AuditReport", "Finding", "allowlist", "audit", "audit_graph", "audit_grid"]
