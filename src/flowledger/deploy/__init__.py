"""L3 deploy: declarative workflow artifacts over MCP tools.

* Artifacts (``flowledger.artifact/v1``, docs/deploy.md): immutable, versioned,
  declarative graphs whose nodes call tools of MCP sources, compute state, branch, run
  in parallel, pause for a person, or run a saved child artifact. `load_artifact` reads
  one from YAML or JSON, `validate_artifact` checks everything that can be checked before
  a run, `ArtifactStore` keeps them per session, content-addressed and immutable.
* Sources (docs/sources.md): specs (`StdioSource`, `HttpSource`), a session with one
  source (`SourceSession`: bounded connect and call timeouts, every page of the tool
  listing, typed errors), one session per source for a run (`SourcePool`), and tool
  fingerprints (`contract_fingerprint`, `full_fingerprint`).

This layer imports only storage, flow and workflows; it is transport neutral.
"""

from .artifact import (
    ARTIFACT_FORMAT,
    REDUCERS,
    Artifact,
    Case,
    Dependency,
    EndNode,
    InterruptNode,
    Node,
    ParallelNode,
    SetNode,
    StateField,
    SwitchNode,
    ToolNode,
    WorkflowNode,
)
from .compile import (
    ArtifactDefinition,
    artifact_outcome,
    closure_digest,
    compile_artifact,
    compile_saved,
)
from .document import SourceFormat, read_document
from .errors import (
    ArtifactConflictError,
    ArtifactCorruptError,
    ArtifactError,
    ArtifactInUseError,
    ArtifactIssue,
    ArtifactNotFoundError,
    ArtifactValidationError,
    ExpressionError,
)
from .expressions import Expression, Template, truthy
from .fingerprint import (
    FingerprintError,
    contract_fingerprint,
    full_fingerprint,
    strip_annotations,
)
from .intents import Intent, ToolIntents
from .run_errors import (
    ArtifactCompileError,
    NodeExecutionError,
    NodeOutputError,
    ToolErrorResult,
    ToolOutcomeUnknownError,
    ToolResultTooLargeError,
)
from .schema import artifact_json_schema
from .source_errors import (
    ConnectionLostError,
    SessionClosedError,
    SourceError,
    SourceProtocolError,
    SourceSpecError,
    SourceUnreachableError,
    ToolArgumentsError,
    ToolCallError,
    ToolCallFailedError,
    ToolCallRejectedError,
    ToolCallTimeoutError,
    ToolNotFoundError,
    ToolResultInvalidError,
)
from .source_pool import SourcePool
from .source_spec import HttpSource, Source, StdioSource
from .sources import ServerInfo, SourceSession, ToolResult
from .store import ArtifactRecord, ArtifactStore, ChildPin, Referrer, StoredArtifact
from .tool_info import ToolInfo
from .trace import RunTrace, TraceEntry, TracePage
from .validate import ValidatedArtifact, load_artifact, validate_artifact

__all__ = [
    "ARTIFACT_FORMAT",
    "REDUCERS",
    "Artifact",
    "ArtifactCompileError",
    "ArtifactConflictError",
    "ArtifactCorruptError",
    "ArtifactDefinition",
    "ArtifactError",
    "ArtifactInUseError",
    "ArtifactIssue",
    "ArtifactNotFoundError",
    "ArtifactRecord",
    "ArtifactStore",
    "ArtifactValidationError",
    "Case",
    "ChildPin",
    "ConnectionLostError",
    "Dependency",
    "EndNode",
    "Expression",
    "ExpressionError",
    "FingerprintError",
    "HttpSource",
    "Intent",
    "InterruptNode",
    "Node",
    "NodeExecutionError",
    "NodeOutputError",
    "ParallelNode",
    "Referrer",
    "RunTrace",
    "ServerInfo",
    "SessionClosedError",
    "SetNode",
    "Source",
    "SourceError",
    "SourceFormat",
    "SourcePool",
    "SourceProtocolError",
    "SourceSession",
    "SourceSpecError",
    "SourceUnreachableError",
    "StateField",
    "StdioSource",
    "StoredArtifact",
    "SwitchNode",
    "Template",
    "ToolArgumentsError",
    "ToolCallError",
    "ToolCallFailedError",
    "ToolCallRejectedError",
    "ToolCallTimeoutError",
    "ToolErrorResult",
    "ToolInfo",
    "ToolIntents",
    "ToolNode",
    "ToolNotFoundError",
    "ToolOutcomeUnknownError",
    "ToolResult",
    "ToolResultInvalidError",
    "ToolResultTooLargeError",
    "TraceEntry",
    "TracePage",
    "ValidatedArtifact",
    "WorkflowNode",
    "artifact_json_schema",
    "artifact_outcome",
    "closure_digest",
    "compile_artifact",
    "compile_saved",
    "contract_fingerprint",
    "full_fingerprint",
    "load_artifact",
    "read_document",
    "strip_annotations",
    "truthy",
    "validate_artifact",
]
