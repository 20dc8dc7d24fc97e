"""The JSON Schema of the artifact format, generated from its pydantic models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from .model import ARTIFACT_FORMAT, Artifact

__all__ = ["artifact_json_schema", "document_input_schema", "model_json_schema"]


def artifact_json_schema() -> dict[str, Any]:
    """A Draft 2020-12 JSON Schema of ``flowledger.artifact/v1`` (structure only: what it
    cannot express, such as node references and expressions, `validate_artifact`
    checks)."""
    return model_json_schema(Artifact, ARTIFACT_FORMAT)


def model_json_schema(model: type[BaseModel], document_format: str) -> dict[str, Any]:
    """The Draft 2020-12 JSON Schema of a document format's pydantic ``model``, with
    ``$id`` ``urn:flowledger:<document_format>`` and its keyed maps closed."""
    schema = model.model_json_schema(mode="validation")
    _close_keyed_maps(schema)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:flowledger:{document_format}",
        **schema,
    }


def document_input_schema(document_schema: dict[str, Any], uri: str) -> dict[str, Any]:
    """A tool's input schema whose one argument ``document`` is a document of the format
    ``document_schema`` describes: an object following it, or its YAML/JSON text.

    The format's schema is the first alternative (its definitions moved to the root, where
    its ``$ref`` pointers resolve); any object and any string are the others, so a
    document that does not follow the format still reaches the tool, which answers every
    issue with its place, code and next actions (a schema validator would name only the
    first)."""
    definitions = dict(document_schema.get("$defs", {}))
    root = {
        key: value
        for key, value in document_schema.items()
        if key not in {"$defs", "$schema", "$id"}
    }
    title = str(document_schema.get("$id", "")).removeprefix("urn:flowledger:")
    definitions["document"] = root
    return {
        "type": "object",
        "$defs": definitions,
        "properties": {
            "document": {
                "description": f"A {title} document: an object following the schema "
                f"(also resource {uri}), or its YAML or JSON text. One that does not "
                "follow it is answered with every issue found, not refused here.",
                "anyOf": [
                    {"$ref": "#/$defs/document"},
                    {"type": "object"},
                    {"type": "string"},
                ],
            }
        },
        "required": ["document"],
        "additionalProperties": False,
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
