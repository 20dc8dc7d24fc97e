"""The JSON Schema of the deployment format, generated from its pydantic models."""

from __future__ import annotations

from typing import Any

from ..artifacts.schema import model_json_schema
from .document import DEPLOYMENT_FORMAT, Deployment

__all__ = ["deployment_json_schema"]


def deployment_json_schema() -> dict[str, Any]:
    """A Draft 2020-12 JSON Schema of ``flowledger.deployment/v1`` (structure only: the
    bindings against the artifact's dependencies `validate_deployment` and the start
    checks verify)."""
    return model_json_schema(Deployment, DEPLOYMENT_FORMAT)
