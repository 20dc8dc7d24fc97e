"""Checking a database's workflow records: what is damaged, and which runs it touches.

`scan_values` reads every stored value once (each checksum checked), `audit_runs` reads
every run's records through the readers that decode them and holds them against each
other, and `Findings` collects the damage with the runs it touches into an
`AuditReport`. They read only. The whole database check (`flowledger check`) adds the
engine's own check and the deploy layer's records: `flowledger.deploy.audit_store`.
"""

from .findings import AuditReport, Damage, Findings, RunIndex
from .runs import audit_runs, why
from .values import scan_values

__all__ = ["AuditReport", "Damage", "Findings", "RunIndex", "audit_runs", "scan_values", "why"]
