"""The deploy layer's tools on the MCP server: ``run_deployment``, ``resume_run``,
``inspect_run``, ``validate_run``, ``read_run_trace``, ``artifact_save``,
``artifact_validate``, ``artifact_list``, ``artifact_show``, ``source_probe``,
``deployment_save``, ``deployment_list`` and ``deployment_show``
(`flowledger.deploy.DeployTools`), served beside the ``workflow_*`` tools by a server
that executes runs (a read-only server lists only the reading ones, and not
``source_probe``, which launches commands). A front-door server (``--no-execute``) does
not serve them: a deployed run's environment is validated and pinned by the process
that executes it."""

from __future__ import annotations

from ..deploy import DeployService
from ..deploy.deployments.tools import Bundle, DeployTools, combined
from ..tools import WorkflowTools
from ..workflows.session import WorkflowSession

__all__ = ["Bundle", "with_deploy_tools"]


def with_deploy_tools(
    tools: WorkflowTools, session: WorkflowSession, *, front_door: bool
) -> Bundle:
    if front_door:
        return tools
    return combined(tools, DeployTools(DeployService(session)))
