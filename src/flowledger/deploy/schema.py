"""The JSON Schema of the artifact format, generated from its pydantic models."""

from __future__ import annotations

from typing import Any

from .artifact import ARTIFACT_FORMAT, Artifact

__all__ = ["artifact_json_schema"]


def artifact_json_schema() -> dict[str, Any]:
    """A Draft 2020-12 JSON Schema of ``flowledger.artifact/v1`` (structure only: what it
    cannot express, such as node references and expressions, `validate_artifact`
    checks)."""
    schema = Artifact.model_json_schema(mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:flowledger:{ARTIFACT_FORMAT}",
        **schema,
    }
