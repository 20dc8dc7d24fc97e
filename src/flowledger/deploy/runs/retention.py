"""The ledger logs a deployed run keeps beside its checkpoints, for `workflows.retention.pruning`.

A deployed run's trace (``deploy/traces/<graph run>``), tool intents
(``deploy/intents/<graph run>``) and pin (``deploy/pins/<graph run>``) are keyed by the
run's graph run ID, not its session: the retention pass asks this function for them so
that pruning a run deletes them too. Logs a run never wrote are skipped by the pass.
"""

from __future__ import annotations

from ...workflows.records.run import Run
from ..deployments.pin import pin_log
from .intents import intent_log
from .trace import trace_log

__all__ = ["deployed_run_logs"]


def deployed_run_logs(run: Run) -> list[str]:
    """The deploy layer's logs of ``run`` (whether or not it is a deployed run)."""
    return [trace_log(run.graph_run_id), intent_log(run.graph_run_id), pin_log(run.graph_run_id)]
