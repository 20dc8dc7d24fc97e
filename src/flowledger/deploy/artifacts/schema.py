"""The JSON Schema of the artifact format, generated from its pydantic models."""

from __future__ import annotations

from typing import Any

from .model import ARTIFACT_FORMAT, Artifact

__all__ = ["artifact_json_schema"]


def artifact_json_schema() -> dict[str, Any]:
    """A Draft 2020-12 JSON Schema of ``flowledger.artifact/v1`` (structure only: what it
    cannot express, such as node references and expressions, `validate_artifact`
    checks)."""
    schema = Artifact.model_json_schema(mode="validation")
    _close_keyed_maps(schema)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:flowledger:{ARTIFACT_FORMAT}",
        **schema,
    }


def _close_keyed_maps(node: Any) -> None:
    """Maps whose keys follow a grammar (node ids, state fields, ...) come out of pydantic
    as ``patternProperties`` alone, which lets other keys through; close them."""
    pending = [node]
    while pending:
        current = pending.pop()
        if isinstance(current, dict):
            if "patternProperties" in current and "additionalProperties" not in current:
                current["additionalProperties"] = False
            pending.extend(current.values())
        elif isinstance(current, list):
            pending.extend(current)
