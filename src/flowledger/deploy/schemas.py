"""The JSON Schemas of the deploy layer's document formats, by short name: what the CLI
prints (``flowledger artifact schema``) and the MCP server serves as resources
(``flowledger://schemas/<name>``), from one source (the formats' pydantic models).

Each schema states the structure only; what it cannot express (node references,
expressions, bindings against an artifact's dependencies) the format's validation checks,
and its issues name the place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .artifacts.model import ARTIFACT_FORMAT
from .artifacts.schema import artifact_json_schema
from .deployments.document import DEPLOYMENT_FORMAT
from .deployments.schema import deployment_json_schema
from .registry.document import SOURCE_FORMAT
from .registry.schema import source_json_schema

__all__ = ["SCHEMAS", "DocumentSchema", "schema_uri"]

#: Where the MCP server serves a format's schema: ``flowledger://schemas/<name>``.
SCHEME: Final = "flowledger://schemas/"


def schema_uri(name: str) -> str:
    """``flowledger://schemas/<name>``."""
    return SCHEME + name


@dataclass(frozen=True)
class DocumentSchema:
    """One format: its ``name`` (``artifact``), ``format`` (``flowledger.artifact/v1``),
    what it is for, and how to build its schema (a new dict each call)."""

    name: str
    format: str
    description: str
    build: Callable[[], dict[str, Any]]


SCHEMAS: Final[Mapping[str, DocumentSchema]] = {
    item.name: item
    for item in (
        DocumentSchema(
            "artifact",
            ARTIFACT_FORMAT,
            "A workflow artifact: the document artifact_save, artifact_validate and "
            "draft_patch work on (name, version, input/output schema, dependencies, "
            "nodes).",
            artifact_json_schema,
        ),
        DocumentSchema(
            "deployment",
            DEPLOYMENT_FORMAT,
            "A deployment: the document deployment_save takes (an artifact version and, "
            "per dependency, the registered source it runs against).",
            deployment_json_schema,
        ),
        DocumentSchema(
            "source",
            SOURCE_FORMAT,
            "A registered MCP source, as the operator registers it (flowledger source "
            "add); tenants see sources through capability_list.",
            source_json_schema,
        ),
    )
}
