"""Validating an artifact: structure, then everything that can be known statically.

`validate_artifact` returns a `ValidatedArtifact` (the model, its canonical bytes and
SHA-256 digest, every template and condition compiled, every schema compiled, and the
node sets of each parallel branch) or raises `ArtifactValidationError` with every
problem found, each with its place. Structure problems (pydantic) are reported
together; the semantic checks (`flowledger.deploy.artifacts.checks`) run once the structure is
sound, and are reported together too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import rfc8785
from pydantic import ValidationError

from .checks import TOOL_RESULT_FIELDS, WORKFLOW_RESULT_FIELDS, Checker
from .contracts import check_child_contracts, closed_properties
from .document import SourceFormat, check_json_data, read_document
from .errors import ROOT_PLACE, ArtifactIssue, ArtifactValidationError
from .limits import MAX_ARTIFACT_BYTES
from .model import Artifact
from .structure import structure_issues
from .validated import ValidatedArtifact

__all__ = [
    "TOOL_RESULT_FIELDS",
    "WORKFLOW_RESULT_FIELDS",
    "ValidatedArtifact",
    "check_child_contracts",
    "closed_properties",
    "load_artifact",
    "validate_artifact",
]


def load_artifact(source: str | bytes, *, format: SourceFormat | None = None) -> ValidatedArtifact:
    """Read an authored artifact (YAML or JSON text; ``format`` ``None`` guesses) and
    validate it; `ArtifactValidationError` lists every problem."""
    return validate_artifact(read_document(source, format))


def validate_artifact(document: Artifact | Mapping[str, Any] | Any) -> ValidatedArtifact:
    """Validate JSON data (or an `Artifact`); `ArtifactValidationError` lists every
    problem found, each with its place."""
    if isinstance(document, Artifact):
        artifact = document  # built in Python: its values may still be no JSON (NaN)
        issues = check_json_data(artifact.model_dump(mode="python", exclude_defaults=True))
        if issues:
            raise ArtifactValidationError(issues)
    else:
        issues = check_json_data(document)
        if not issues and not isinstance(document, dict):
            issues = [ArtifactIssue(ROOT_PLACE, "not_object", "an artifact is a JSON object")]
        if issues:
            raise ArtifactValidationError(issues)
        try:
            artifact = Artifact.model_validate(document)
        except ValidationError as exc:
            raise ArtifactValidationError(structure_issues(exc, document)) from None
    checker = Checker(artifact)
    try:
        canonical = rfc8785.dumps(artifact.canonical_data())
    except (rfc8785.CanonicalizationError, ValueError, TypeError) as exc:
        checker.issue(ROOT_PLACE, "not_json", f"the artifact has no canonical JSON form: {exc}")
        canonical = b""
    if len(canonical) > MAX_ARTIFACT_BYTES:  # reported first: it decides everything else
        checker.issue(
            ROOT_PLACE,
            "too_large",
            f"the canonical artifact is {len(canonical)} bytes; the limit is {MAX_ARTIFACT_BYTES}",
            "move parts into child artifacts",
        )
    checker.run()
    if checker.issues:
        raise ArtifactValidationError(checker.issues)
    return checker.validated(canonical)
