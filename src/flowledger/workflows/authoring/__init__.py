"""Authoring: how a workflow is described before anything runs.

A `Definition` (usually a `TypedDefinition`) pairs a flow graph with its `Metadata`: name,
version, strict JSON Schemas for the input and resume payloads (`schema`), the labels of
its vertices and the state fields it declares (`state_fields`). `readiness` holds the
vocabulary a definition and the runtime use to say whether a stopped run can be resumed
now (`ResumeReadiness`, `Diagnostic`). Nothing here reads or writes storage.
"""

from .definition import (
    Definition,
    ErrorPolicy,
    TypedDefinition,
    ValidatedInput,
    ValidatedResume,
    WorkflowResult,
)
from .metadata import Metadata, VertexMetadata, bound_summary, bound_text
from .readiness import Diagnostic, ReadinessStatus, ResumeReadiness

__all__ = [
    "Definition",
    "Diagnostic",
    "ErrorPolicy",
    "Metadata",
    "ReadinessStatus",
    "ResumeReadiness",
    "TypedDefinition",
    "ValidatedInput",
    "ValidatedResume",
    "VertexMetadata",
    "WorkflowResult",
    "bound_summary",
    "bound_text",
]
