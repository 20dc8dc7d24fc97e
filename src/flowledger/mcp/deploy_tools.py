"""The deploy layer's tools on the MCP server: ``run_deployment``, ``resume_run``,
``inspect_run``, ``validate_run``, ``read_run_trace``, ``artifact_save``,
``artifact_validate``, ``artifact_list``, ``artifact_show``, ``artifact_delete``,
``source_probe``, ``deployment_save``, ``deployment_list``, ``deployment_show``,
``deployment_check``, ``deployment_rollback`` and ``deployment_delete``
(`flowledger.deploy.DeployTools`), served beside the ``workflow_*`` tools (a read-only
server lists only the reading ones: not ``source_probe``, which launches commands, nor
the deletes and the rollback).
On a front door (``--no-execute``) the environment is validated and the pin written
here, and the run is started and resumed through the front door by the ``flowledger
worker`` that owns the session."""

from __future__ import annotations

from ..deploy import DeployService
from ..deploy.deployments.tools import Bundle, DeployTools, combined
from ..deploy.registry.access import SourceAccess
from ..tools import SupervisorPort, WorkflowTools
from ..workflows.runtime.session import WorkflowSession

__all__ = ["Bundle", "with_deploy_tools"]


def with_deploy_tools(
    tools: WorkflowTools,
    session: WorkflowSession,
    *,
    control: SupervisorPort | None = None,
    start_timeout: float = 30.0,
    access: SourceAccess = SourceAccess.OPERATOR,
) -> Bundle:
    """``control``: a front door's (default: the session's own supervisor); ``access``:
    what the server's clients may do with sources."""
    service = DeployService(session, supervisor=control, start_timeout=start_timeout, access=access)
    return combined(tools, DeployTools(service))
