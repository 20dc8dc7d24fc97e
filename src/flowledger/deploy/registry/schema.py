"""The JSON Schema of the registered source format, generated from its pydantic models."""

from __future__ import annotations

from typing import Any

from ..artifacts.schema import model_json_schema
from .document import SOURCE_FORMAT, SourceDocument

__all__ = ["source_json_schema"]


def source_json_schema() -> dict[str, Any]:
    """A Draft 2020-12 JSON Schema of ``flowledger.source/v1`` (structure only: secrets
    and transports `validate_source` checks)."""
    return model_json_schema(SourceDocument, SOURCE_FORMAT)
