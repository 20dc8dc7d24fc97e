"""Checks that need the saved children: how a parent uses each child's schemas."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowledger.workflows.authoring.schema import SchemaValidationError

from .errors import ArtifactIssue, choices, place_of
from .model import ForeachNode, ForeachWorkflowBody, WorkflowNode
from .validated import ValidatedArtifact

__all__ = ["check_child_contracts", "closed_properties"]


def closed_properties(schema: Mapping[str, Any]) -> frozenset[str] | None:
    """The property names a closed object schema allows at its root, or ``None`` when
    that cannot be told statically (pattern properties, or no ``properties`` map)."""
    if "patternProperties" in schema or schema.get("additionalProperties") is not False:
        return None
    properties = schema.get("properties", {})
    return frozenset(properties) if isinstance(properties, dict) else None


def check_child_contracts(
    validated: ValidatedArtifact, children: Mapping[str, ValidatedArtifact]
) -> list[ArtifactIssue]:
    """What can be checked once the saved children are known: each workflow node's and
    each foreach workflow body's ``input`` against the child's closed ``input_schema``
    (property names, required properties, and the whole value when it is literal), and
    every ``result.output.<f>`` a workflow node reads against the child's
    ``output_schema``."""
    issues: list[ArtifactIssue] = []
    for node_id, node in validated.artifact.nodes.items():
        if isinstance(node, ForeachNode) and isinstance(node.body, ForeachWorkflowBody):
            if node.body.workflow in children:
                child = children[node.body.workflow]
                base = ("nodes", node_id, "body", "input")
                issues += _child_input(validated, child, base, node.body.input)
            continue
        if not isinstance(node, WorkflowNode) or node.workflow not in children:
            continue
        child = children[node.workflow]
        issues += _child_input(validated, child, ("nodes", node_id, "input"), node.input)
        outputs = closed_properties(child.artifact.output_schema)
        if outputs is None:
            continue
        for field_name in node.assign:
            template = validated.templates.get(place_of("nodes", node_id, "assign", field_name))
            for expression in template.expressions if template is not None else ():
                for chain in expression.references:
                    if (
                        chain[:2] == ("result", "output")
                        and chain[2:3]
                        and (chain[2] not in outputs)
                    ):
                        issues.append(
                            ArtifactIssue(
                                expression.place,
                                "unknown_field",
                                f"child {child.name}@{child.version} has no output "
                                f"property {chain[2]!r}",
                                choices("its output properties", outputs),
                            )
                        )
    return issues


def _child_input(
    validated: ValidatedArtifact,
    child: ValidatedArtifact,
    base: tuple[str, ...],
    given: Any,
) -> list[ArtifactIssue]:
    """A child's ``input`` template (at ``base``) against its closed ``input_schema``."""
    issues: list[ArtifactIssue] = []
    accepted = closed_properties(child.artifact.input_schema)
    if isinstance(given, dict):
        for key in given:
            if accepted is not None and key not in accepted:
                issues.append(
                    ArtifactIssue(
                        place_of(*base, key),
                        "unknown_field",
                        f"child {child.name}@{child.version} has no input property {key!r}",
                        choices("its input properties", accepted),
                    )
                )
        required = child.artifact.input_schema.get("required", [])
        for needed in required if isinstance(required, list) else []:
            if isinstance(needed, str) and needed not in given:
                issues.append(
                    ArtifactIssue(
                        place_of(*base),
                        "field_missing",
                        f"child {child.name}@{child.version} requires input {needed!r}",
                    )
                )
        template = validated.templates.get(place_of(*base))
        schema = child.schemas.get("input_schema")
        if template is not None and template.is_literal and schema is not None:
            try:
                schema.validate(given)
            except SchemaValidationError as exc:
                issues.append(ArtifactIssue(place_of(*base), "input_invalid", str(exc)))
    return issues
