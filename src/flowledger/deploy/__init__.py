"""L3 deploy: declarative workflow artifacts, and the store that keeps them.

An artifact (``flowledger.artifact/v1``, docs/deploy.md) is an immutable, versioned,
declarative graph whose nodes call tools of MCP sources, compute state, branch, run in
parallel, pause for a person, or run a saved child artifact. `load_artifact` reads one
from YAML or JSON and `validate_artifact` checks everything that can be checked before
a run; `ArtifactStore` keeps artifacts per session, content-addressed and immutable.

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
from .schema import artifact_json_schema
from .store import ArtifactRecord, ArtifactStore, ChildPin, Referrer, StoredArtifact
from .validate import ValidatedArtifact, load_artifact, validate_artifact

__all__ = [
    "ARTIFACT_FORMAT",
    "REDUCERS",
    "Artifact",
    "ArtifactConflictError",
    "ArtifactCorruptError",
    "ArtifactError",
    "ArtifactInUseError",
    "ArtifactIssue",
    "ArtifactNotFoundError",
    "ArtifactRecord",
    "ArtifactStore",
    "ArtifactValidationError",
    "Case",
    "ChildPin",
    "Dependency",
    "EndNode",
    "Expression",
    "ExpressionError",
    "InterruptNode",
    "Node",
    "ParallelNode",
    "Referrer",
    "SetNode",
    "SourceFormat",
    "StateField",
    "StoredArtifact",
    "SwitchNode",
    "Template",
    "ToolNode",
    "ValidatedArtifact",
    "WorkflowNode",
    "artifact_json_schema",
    "load_artifact",
    "read_document",
    "truthy",
    "validate_artifact",
]
