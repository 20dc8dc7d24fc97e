"""`ValidatedArtifact`: an artifact that passed every static check, with its compiled parts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from flowledger.workflows.authoring.schema import CompiledSchema

from .expressions import Expression, Template
from .graph import targets
from .model import Artifact

__all__ = ["ValidatedArtifact"]

_INITIAL: Final[Mapping[str, Any]] = {"replace": None, "append": [], "merge": {}, "sum": 0}


@dataclass(frozen=True, eq=False)
class ValidatedArtifact:
    """An artifact that passed every static check, with its compiled parts.

    ``templates`` and ``conditions`` are keyed by place: ``nodes.<id>.arguments``,
    ``nodes.<id>.assign.<field>``, ``nodes.<id>.request``, ``nodes.<id>.input``,
    ``nodes.<id>.output``, ``nodes.<id>.body.arguments``, ``nodes.<id>.body.value``,
    ``nodes.<id>.cases[<i>].when`` and ``nodes.<id>.items``. ``schemas`` holds
    ``input_schema``, ``output_schema`` and ``nodes.<id>.resume_schema``. ``branches``
    maps each parallel node to the node ids of each of its branches (in order).
    ``sequences`` maps each foreach node with a sequence body to that body, validated as
    its anonymous artifact (`flowledger.deploy.artifacts.sequence`)."""

    artifact: Artifact
    canonical: bytes
    digest: str
    templates: Mapping[str, Template]
    conditions: Mapping[str, Expression]
    schemas: Mapping[str, CompiledSchema]
    branches: Mapping[str, tuple[frozenset[str], ...]]
    sequences: Mapping[str, ValidatedArtifact] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.artifact.name

    @property
    def version(self) -> str:
        return self.artifact.version

    def initial_state(self) -> dict[str, Any]:
        """Every declared state field with its first value (a fresh copy each call)."""
        state: dict[str, Any] = {}
        for name, spec in self.artifact.state.items():
            value = spec.initial if spec.initial is not None else _INITIAL[spec.reduce]
            state[name] = _copy(value)
        return state

    def successors(self, node_id: str) -> tuple[str, ...]:
        """The nodes ``node_id`` may continue at (for a parallel node: its branches)."""
        return tuple(target for target, _ in targets(node_id, self.artifact.nodes[node_id]))


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value
