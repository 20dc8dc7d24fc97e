"""L3 deploy: declarative workflow artifacts over MCP tools.

* Artifacts (``flowledger.artifact/v1``, docs/deploy.md): immutable, versioned,
  declarative graphs whose nodes call tools of MCP sources, compute state, branch, run
  in parallel, pause for a person, or run a saved child artifact. `load_artifact` reads
  one from YAML or JSON, `validate_artifact` checks everything that can be checked before
  a run, `ArtifactStore` keeps them per session, content-addressed and immutable.
* Sources (docs/sources.md): specs (`StdioSource`, `HttpSource`), a session with one
  source (`SourceSession`: bounded connect and call timeouts, every page of the tool
  listing, typed errors), one session per source for a run (`SourcePool`), and tool
  fingerprints (`contract_fingerprint`, `full_fingerprint`). Functions of a Python
  module and the built-in transforms are sources too (`PythonSource`, `PythonSession`:
  the same interface as an MCP session; registered by the operator only), and so are the
  operations of an OpenAPI document (`OpenApiSource`, `OpenApiSession`).
* Deployments (``flowledger.deployment/v1``, docs/deploy.md "Deployments"): an exact
  artifact version bound to concrete sources, credentials by reference, a drift policy;
  `DeploymentStore` keeps immutable revisions with a ``live`` pointer. `DeployService`
  validates before start (``unrunnable``), pins each run's environment (`Pin`), and
  revalidates the pin before every resume (`DeployedDefinition.check_resume`).

* `backfill_refs` registers the attachment references of a store written before the
  ledger recorded them (checkpoints and pins), so it can be swept (docs/storage.md).
* `audit_store` checks a whole database for damage - the engine's check, every value's
  checksum, every run's records and the deploy records - and says which runs it touches
  (`flowledger check`, docs/reliability.md).

This layer imports only storage, flow and workflows; it is transport neutral.
"""

from .artifacts.document import SourceFormat, read_document
from .artifacts.errors import (
    ArtifactConflictError,
    ArtifactCorruptError,
    ArtifactError,
    ArtifactInUseError,
    ArtifactIssue,
    ArtifactNotFoundError,
    ArtifactValidationError,
    ExpressionError,
    ExpressionLimitError,
)
from .artifacts.expressions import Expression, Template, truthy
from .artifacts.model import (
    ARTIFACT_FORMAT,
    REDUCERS,
    Artifact,
    Case,
    Dependency,
    EndNode,
    ForeachNode,
    InterruptNode,
    Node,
    ParallelNode,
    SetNode,
    StateField,
    SwitchNode,
    ToolNode,
    WaitNode,
    WorkflowNode,
)
from .artifacts.schema import artifact_json_schema
from .artifacts.store import ArtifactRecord, ArtifactStore, ChildPin, Referrer, StoredArtifact
from .artifacts.validate import ValidatedArtifact, load_artifact, validate_artifact
from .audit import audit_store
from .deployments.definition import DeployedDefinition, PinMissingError, deployed_definition
from .deployments.document import (
    DEPLOYMENT_FORMAT,
    CredentialMissingError,
    Deployment,
    DeploymentValidationError,
    SourceBinding,
    ValidatedDeployment,
    load_deployment,
    validate_deployment,
)
from .deployments.pin import Pin, PinStore
from .deployments.service import DeployService, NotADeployedRunError
from .deployments.store import (
    DeploymentConflictError,
    DeploymentCorruptError,
    DeploymentNotFoundError,
    DeploymentRevision,
    DeploymentStore,
)
from .deployments.validation import check_pinned, check_start
from .refs import backfill_refs
from .runs.compile import (
    ArtifactDefinition,
    artifact_outcome,
    closure_digest,
    compile_artifact,
    compile_saved,
)
from .runs.errors import (
    ArtifactCompileError,
    NodeExecutionError,
    NodeOutputError,
    ToolContractChangedError,
    ToolErrorResult,
    ToolOutcomeUnknownError,
    ToolResultTooLargeError,
)
from .runs.intents import Intent, ToolIntents
from .runs.trace import RunTrace, TraceEntry, TracePage
from .sources.errors import (
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
from .sources.fingerprint import (
    FingerprintError,
    contract_fingerprint,
    full_fingerprint,
    strip_annotations,
)
from .sources.openapi_session import OpenApiSession
from .sources.openapi_spec import OpenApiAuth, OpenApiSource
from .sources.pool import SourcePool
from .sources.python_session import PythonSession
from .sources.python_spec import PythonSource
from .sources.session import ServerInfo, SourceSession, ToolResult
from .sources.spec import HttpSource, Source, StdioSource
from .sources.tool_info import ToolInfo

__all__ = [
    "ARTIFACT_FORMAT",
    "DEPLOYMENT_FORMAT",
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
    "CredentialMissingError",
    "Dependency",
    "DeployService",
    "DeployedDefinition",
    "Deployment",
    "DeploymentConflictError",
    "DeploymentCorruptError",
    "DeploymentNotFoundError",
    "DeploymentRevision",
    "DeploymentStore",
    "DeploymentValidationError",
    "EndNode",
    "Expression",
    "ExpressionError",
    "ExpressionLimitError",
    "FingerprintError",
    "ForeachNode",
    "HttpSource",
    "Intent",
    "InterruptNode",
    "Node",
    "NodeExecutionError",
    "NodeOutputError",
    "NotADeployedRunError",
    "OpenApiAuth",
    "OpenApiSession",
    "OpenApiSource",
    "ParallelNode",
    "Pin",
    "PinMissingError",
    "PinStore",
    "PythonSession",
    "PythonSource",
    "Referrer",
    "RunTrace",
    "ServerInfo",
    "SessionClosedError",
    "SetNode",
    "Source",
    "SourceBinding",
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
    "ToolContractChangedError",
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
    "ValidatedDeployment",
    "WaitNode",
    "WorkflowNode",
    "artifact_json_schema",
    "artifact_outcome",
    "audit_store",
    "backfill_refs",
    "check_pinned",
    "check_start",
    "closure_digest",
    "compile_artifact",
    "compile_saved",
    "contract_fingerprint",
    "deployed_definition",
    "full_fingerprint",
    "load_artifact",
    "load_deployment",
    "read_document",
    "strip_annotations",
    "truthy",
    "validate_artifact",
    "validate_deployment",
]
