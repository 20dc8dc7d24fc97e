"""The semantics catalog with a retention policy (``--app tests.mcp.retention_app:catalog``):
completed runs are kept 30 days."""

from __future__ import annotations

from datetime import timedelta

from flowledger.workflows import Catalog
from flowledger.workflows.retention.pruning import RetentionPolicy, parse_statuses

from ..workflows import semantics_app


def catalog() -> Catalog:
    served = semantics_app.catalog()
    served.retention = RetentionPolicy(timedelta(days=30), parse_statuses("completed"))
    return served
