"""L3 tools: the transport-neutral tools of one session: the run tools of workflows-spec
§7 (`WorkflowTools`: list definitions; start, get, list, resume, cancel a run; read its
history), ``workflow_run_fork`` beside them (`ForkTools`),
and the table machinery (`tools.table`) the deploy layer's tools are built on.

`WorkflowTools` describes the tools (`ToolInfo`) and runs them: JSON arguments in, a JSON
result out, `ToolError` (model-facing, never carrying private data) on any failure. The
MCP server and the CLI put them on the wire.
"""

from .arguments import (
    MAX_ARGUMENT_BYTES,
    MAX_ARGUMENT_DEPTH,
    ArgumentField,
    canonical_uuid,
    decode_arguments,
    parse_id,
)
from .bundle import (
    MUTATING_TOOLS,
    READ_ONLY_TOOLS,
    TOOL_NAMES,
    CancelIntentPort,
    CatalogPort,
    InputsPort,
    RegistryPort,
    StartTicketPort,
    SupervisorPort,
    ToolInfo,
    WorkflowTools,
)
from .errors import PrepareRunIntegrityError, ToolError
from .fork import FORK_TOOL, ForkTools
from .reading import ReadingControl
from .results import history_entry, history_result, result_text, run_result

__all__ = [
    "FORK_TOOL",
    "MAX_ARGUMENT_BYTES",
    "MAX_ARGUMENT_DEPTH",
    "MUTATING_TOOLS",
    "READ_ONLY_TOOLS",
    "TOOL_NAMES",
    "ArgumentField",
    "CancelIntentPort",
    "CatalogPort",
    "ForkTools",
    "InputsPort",
    "PrepareRunIntegrityError",
    "ReadingControl",
    "RegistryPort",
    "StartTicketPort",
    "SupervisorPort",
    "ToolError",
    "ToolInfo",
    "WorkflowTools",
    "canonical_uuid",
    "decode_arguments",
    "history_entry",
    "history_result",
    "parse_id",
    "result_text",
    "run_result",
]
