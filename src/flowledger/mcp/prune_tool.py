"""``workflow_run_prune`` on the MCP server: a model may preview retention, and apply only
the operator's.

Deleting runs is irreversible and erases the history people audit, and a model's tool
calls can be steered by whatever text it reads (a prompt injection in a document under
review could ask it to "clean up"). So the model does not get to choose what goes:

* ``dry_run`` (the default, ``true``) reports what a prune with any ``older_than`` and
  ``statuses`` would delete, writing nothing;
* a real prune (``dry_run: false``) is allowed only when the served catalog has a
  ``retention`` policy, and only at least as old (``older_than`` no shorter than the
  policy's) and among the policy's statuses: what a worker would do on its next pass
  anyway, now. Without a policy it is refused, saying so.

The tool changes runs, so a read-only server does not list it. The result is the
`PruneReport` JSON of ``flowledger prune --json``.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any, Final

from ..deploy.runs.retention import deployed_run_logs
from ..tools import ToolError, ToolInfo
from ..tools.arguments import ArgumentField, decode_arguments, decode_document
from ..tools.errors import invalid_arguments
from ..workflows.retention.pruning import (
    RetentionError,
    RetentionPolicy,
    parse_duration,
    parse_statuses,
    prune,
)
from ..workflows.runtime.session import WorkflowSession

__all__ = ["PRUNE_TOOL", "PruneTool"]

PRUNE_TOOL: Final = "workflow_run_prune"
_FIELDS: Final = (
    ArgumentField("older_than", "string", required=True),
    ArgumentField("statuses", "string"),
)
_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "older_than": {"type": "string", "description": "30d, 12h, 90m or 1d12h"},
        "statuses": {
            "type": "string",
            "description": "comma-separated: completed,cancelled,failed (the default)",
        },
        "dry_run": {"type": "boolean", "default": True},
    },
    "required": ["older_than"],
    "additionalProperties": False,
}
_DESCRIPTION: Final = (
    "Preview (dry_run, the default) which finished runs older than older_than a prune "
    "would delete, with their history, and how many bytes. A real prune (dry_run false) "
    "only applies the operator's retention policy: at least its age, among its statuses."
)


class PruneTool:
    """The one-tool bundle (see the module documentation)."""

    def __init__(self, session: WorkflowSession, policy: RetentionPolicy | None) -> None:
        self.session = session
        self.policy = policy

    def infos(self) -> builtins.list[ToolInfo]:
        return [ToolInfo(PRUNE_TOOL, _DESCRIPTION, dict(_SCHEMA), mutating=True)]

    async def call(
        self, name: str, arguments: Mapping[str, Any] | str | bytes | None
    ) -> dict[str, Any]:
        if name != PRUNE_TOOL:
            raise ToolError(f"unknown tool {name[:64]!r}")
        document = dict(decode_document(arguments))
        dry_run = document.pop("dry_run", True)
        if not isinstance(dry_run, bool):
            raise invalid_arguments("field 'dry_run' must be a boolean")
        fields = decode_arguments(document, _FIELDS)
        try:
            requested = RetentionPolicy(
                parse_duration(fields["older_than"]), parse_statuses(fields.get("statuses"))
            )
        except RetentionError as exc:
            raise invalid_arguments(str(exc), cause=exc) from exc
        if not dry_run:
            self._check_allowed(requested)
        try:
            report = await prune(
                self.session.store,
                self.session.session_id,
                requested,
                dry_run=dry_run,
                now=self.session.clock.now(),
                run_logs=(deployed_run_logs,),
            )
        except RetentionError as exc:
            raise ToolError(f"prune: {exc}", cause=exc) from exc
        return report.to_json()

    def _check_allowed(self, requested: RetentionPolicy) -> None:
        policy = self.policy
        if policy is None:
            raise ToolError(
                "prune refused: this server has no retention policy, so runs are only "
                "deleted by an operator (flowledger prune); dry_run previews are allowed"
            )
        if requested.older_than < policy.older_than:
            raise ToolError(
                f"prune refused: the retention policy keeps runs for "
                f"{int(policy.older_than.total_seconds())}s; older_than may not be shorter"
            )
        if not requested.statuses <= policy.statuses:
            allowed = ",".join(sorted(str(s) for s in policy.statuses))
            raise ToolError(f"prune refused: the retention policy prunes only {allowed}")
