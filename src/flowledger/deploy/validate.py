"""Validating an artifact: structure, then everything that can be known statically.

`validate_artifact` returns a `ValidatedArtifact` (the model, its canonical bytes and
SHA-256 digest, every template and condition compiled, every schema compiled, and the
node sets of each parallel branch) or raises `ArtifactValidationError` with every
problem found, each with its place. Structure problems (pydantic) are reported
together; the semantic checks run once the structure is sound, and are reported
together too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

import rfc8785
from pydantic import ValidationError

from flowledger.workflows.errors import InvalidSchemaError
from flowledger.workflows.metadata import MAX_DESCRIPTION_BYTES, MAX_LABEL_BYTES
from flowledger.workflows.schema import CompiledSchema, SchemaValidationError, compile_schema

from .artifact import (
    NODE_KINDS,
    Artifact,
    EndNode,
    InterruptNode,
    Node,
    ParallelNode,
    SetNode,
    SwitchNode,
    ToolNode,
    WorkflowNode,
)
from .document import SourceFormat, check_json_data, read_document
from .errors import ROOT_PLACE, ArtifactIssue, ArtifactValidationError, place_of
from .expressions import Expression, Template, compile_condition, compile_template, is_expression
from .limits import MAX_ARTIFACT_BYTES, MAX_EXPRESSIONS

__all__ = [
    "TOOL_RESULT_FIELDS",
    "WORKFLOW_RESULT_FIELDS",
    "ValidatedArtifact",
    "check_child_contracts",
    "closed_properties",
    "load_artifact",
    "validate_artifact",
]

TOOL_RESULT_FIELDS: Final = frozenset({"structured", "content", "text"})
WORKFLOW_RESULT_FIELDS: Final = frozenset({"outcome", "output"})
_INITIAL: Final[Mapping[str, Any]] = {"replace": None, "append": [], "merge": {}, "sum": 0}
_BASE: Final = frozenset({"input", "state"})


@dataclass(frozen=True, eq=False)
class ValidatedArtifact:
    """An artifact that passed every static check, with its compiled parts.

    ``templates`` and ``conditions`` are keyed by place: ``nodes.<id>.arguments``,
    ``nodes.<id>.assign.<field>``, ``nodes.<id>.request``, ``nodes.<id>.input``,
    ``nodes.<id>.output`` and ``nodes.<id>.cases[<i>].when``. ``schemas`` holds
    ``input_schema``, ``output_schema`` and ``nodes.<id>.resume_schema``. ``branches``
    maps each parallel node to the node ids of each of its branches (in order)."""

    artifact: Artifact
    canonical: bytes
    digest: str
    templates: Mapping[str, Template]
    conditions: Mapping[str, Expression]
    schemas: Mapping[str, CompiledSchema]
    branches: Mapping[str, tuple[frozenset[str], ...]]

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
        return tuple(target for target, _ in _targets(node_id, self.artifact.nodes[node_id]))


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value


def load_artifact(source: str | bytes, *, format: SourceFormat | None = None) -> ValidatedArtifact:
    """Read an authored artifact (YAML or JSON text; ``format`` ``None`` guesses) and
    validate it; `ArtifactValidationError` lists every problem."""
    return validate_artifact(read_document(source, format))


def validate_artifact(document: Artifact | Mapping[str, Any] | Any) -> ValidatedArtifact:
    """Validate JSON data (or an `Artifact`); `ArtifactValidationError` lists every
    problem found, each with its place."""
    if isinstance(document, Artifact):
        artifact = document
    else:
        issues = check_json_data(document)
        if not issues and not isinstance(document, dict):
            issues = [ArtifactIssue(ROOT_PLACE, "not_object", "an artifact is a JSON object")]
        if issues:
            raise ArtifactValidationError(issues)
        try:
            artifact = Artifact.model_validate(document)
        except ValidationError as exc:
            raise ArtifactValidationError(_structure_issues(exc, document)) from None
    checker = _Checker(artifact)
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
    return ValidatedArtifact(
        artifact,
        canonical,
        hashlib.sha256(canonical).hexdigest(),
        MappingProxyType(checker.templates),
        MappingProxyType(checker.conditions),
        MappingProxyType(checker.schemas),
        MappingProxyType(checker.branches),
    )


# -- structure ---------------------------------------------------------------------------

_HINTS: Final[Mapping[str, str]] = {
    "missing": "add it",
    "extra_forbidden": "remove it, or check its spelling",
    "union_tag_invalid": "kind is one of " + ", ".join(NODE_KINDS),
    "union_tag_not_found": "add `kind`: one of " + ", ".join(NODE_KINDS),
    "literal_error": "",
}


def _structure_issues(exc: ValidationError, document: Any) -> list[ArtifactIssue]:
    issues: list[ArtifactIssue] = []
    union_members: dict[str, int] = {}  # place -> index of its merged issue
    for error in exc.errors(include_url=False):
        path, key_error, union = _place_path(error["loc"], document)
        kind = error["type"]
        message = error["msg"]
        if key_error:
            message = f"the key {path[-1]!r} is not valid: {message}" if path else message
        elif kind == "extra_forbidden":
            message = "unknown field"
        elif kind == "missing":
            message = "this field is required"
        place = place_of(*path)
        if union and place in union_members:  # one issue for all members of a union
            merged = issues[union_members[place]]
            issues[union_members[place]] = ArtifactIssue(
                place, merged.code, f"{merged.message}, or {message[0].lower()}{message[1:]}"
            )
            continue
        if union:
            union_members[place] = len(issues)
        issues.append(ArtifactIssue(place, _code(kind, key_error), message, _HINTS.get(kind, "")))
    return issues


def _place_path(loc: tuple[str | int, ...], document: Any) -> tuple[list[str | int], bool, bool]:
    """The document path of a pydantic error location: the discriminator tag after a node
    id and the member names of other unions are not places. Returns the path, whether the
    error is about a key, and whether it came from a union member."""
    path: list[str | int] = []
    key_error = union = False
    current: Any = document
    for index, part in enumerate(loc):
        if part == "[key]":
            key_error = True
            continue
        if index == 2 and loc[0] == "nodes" and part in NODE_KINDS:
            continue
        present = (isinstance(current, dict) and part in current) or (
            isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        )
        if present:
            current = current[part]
        elif index < len(loc) - 1 or not isinstance(current, dict):
            union = True  # a union member's name (such as `str`), not a document key
            continue
        path.append(part)
    return path, key_error, union


def _code(kind: str, key_error: bool) -> str:
    if key_error:
        return "bad_key"
    return {
        "missing": "field_missing",
        "extra_forbidden": "field_unknown",
        "union_tag_invalid": "bad_kind",
        "union_tag_not_found": "bad_kind",
        "string_pattern_mismatch": "bad_name",
    }.get(kind, "bad_value")


# -- semantics ---------------------------------------------------------------------------


def closed_properties(schema: Mapping[str, Any]) -> frozenset[str] | None:
    """The property names a closed object schema allows at its root, or ``None`` when
    that cannot be told statically (pattern properties, or no ``properties`` map)."""
    if "patternProperties" in schema or schema.get("additionalProperties") is not False:
        return None
    properties = schema.get("properties", {})
    return frozenset(properties) if isinstance(properties, dict) else None


def _targets(node_id: str, node: Node) -> list[tuple[str, tuple[str | int, ...]]]:
    base: tuple[str | int, ...] = ("nodes", node_id)
    if isinstance(node, SwitchNode):
        found = [(case.next, (*base, "cases", i, "next")) for i, case in enumerate(node.cases)]
        return [*found, (node.default, (*base, "default"))]
    if isinstance(node, ParallelNode):
        return [(branch, (*base, "branches", i)) for i, branch in enumerate(node.branches)]
    if isinstance(node, EndNode):
        return []
    return [(node.next, (*base, "next"))]


class _Checker:
    def __init__(self, artifact: Artifact) -> None:
        self.artifact = artifact
        self.issues: list[ArtifactIssue] = []
        self.templates: dict[str, Template] = {}
        self.conditions: dict[str, Expression] = {}
        self.schemas: dict[str, CompiledSchema] = {}
        self.branches: dict[str, tuple[frozenset[str], ...]] = {}
        self.input_properties: frozenset[str] | None = None
        self.output_properties: frozenset[str] | None = None

    def issue(self, place: str, code: str, message: str, hint: str = "") -> None:
        self.issues.append(ArtifactIssue(place, code, message, hint))

    def run(self) -> None:
        a = self.artifact
        self._text(("description",), a.description, MAX_DESCRIPTION_BYTES)
        self.input_properties = self._schema(("input_schema",), a.input_schema)
        self.output_properties = self._schema(("output_schema",), a.output_schema)
        self._state()
        self._dependencies_and_children()
        for node_id, node in a.nodes.items():
            self._node(node_id, node)
        count = sum(len(t.expressions) for t in self.templates.values()) + len(self.conditions)
        if count > MAX_EXPRESSIONS:
            self.issue(
                "nodes",
                "too_many_expressions",
                f"{count} expressions; the limit is {MAX_EXPRESSIONS}",
            )
        if self._references_resolve():
            self._graph()
            self._parallels()

    # -- pieces ---------------------------------------------------------------------

    def _text(self, path: tuple[str | int, ...], text: str | None, limit: int) -> None:
        if text is None:
            return
        size = len(text.encode("utf-8", "replace"))
        if size > limit:
            self.issue(place_of(*path), "too_long", f"{size} bytes; the limit is {limit}")

    def _schema(
        self, path: tuple[str | int, ...], schema: Mapping[str, Any]
    ) -> frozenset[str] | None:
        place = place_of(*path)
        try:
            self.schemas[place] = compile_schema(rfc8785.dumps(dict(schema)), place)
        except InvalidSchemaError as exc:
            self.issue(
                place,
                "invalid_schema",
                str(exc.cause),
                "a schema here is a closed object schema: "
                '"type": "object" and "additionalProperties": false on every object',
            )
            return None
        except (rfc8785.CanonicalizationError, ValueError) as exc:
            self.issue(place, "invalid_schema", f"the schema is not JSON data: {exc}")
            return None
        return closed_properties(schema)

    def _state(self) -> None:
        for name, spec in self.artifact.state.items():
            place = place_of("state", name, "initial")
            initial = spec.initial
            if _holds_expression(initial):
                self.issue(
                    place,
                    "not_a_template",
                    "`initial` is a literal value; expressions are not evaluated here",
                    "compute the value with a `set` node",
                )
            if initial is None:
                continue
            wanted = {"append": list, "merge": dict}.get(spec.reduce)
            if wanted is not None and not isinstance(initial, wanted):
                self.issue(
                    place,
                    "bad_initial",
                    f"a `{spec.reduce}` field starts as "
                    f"{'an array' if wanted is list else 'an object'}",
                )
            if spec.reduce == "sum" and (
                isinstance(initial, bool) or not isinstance(initial, int | float)
            ):
                self.issue(place, "bad_initial", "a `sum` field starts as a number")

    def _dependencies_and_children(self) -> None:
        a = self.artifact
        used_tools: dict[str, set[str]] = {}
        used_children: set[str] = set()
        for node in a.nodes.values():
            if isinstance(node, ToolNode):
                used_tools.setdefault(node.dependency, set()).add(node.tool)
            elif isinstance(node, WorkflowNode):
                used_children.add(node.workflow)
        for name, dependency in a.dependencies.items():
            seen: set[str] = set()
            for index, tool in enumerate(dependency.tools):
                place = place_of("dependencies", name, "tools", index)
                if tool in seen:
                    self.issue(place, "duplicate", f"tool {tool!r} is listed twice")
                elif tool not in used_tools.get(name, set()):
                    self.issue(
                        place,
                        "unused_tool",
                        f"no node calls {tool!r}",
                        "remove it: a deployment checks and pins every declared tool",
                    )
                seen.add(tool)
        for name in a.children:
            if name not in used_children:
                self.issue(
                    place_of("children", name),
                    "unused_child",
                    "no workflow node runs this child",
                    "remove it",
                )

    def _node(self, node_id: str, node: Node) -> None:
        a = self.artifact
        base: tuple[str | int, ...] = ("nodes", node_id)
        self._label(base, node.label)
        if isinstance(node, ToolNode):
            dependency = a.dependencies.get(node.dependency)
            if dependency is None:
                self.issue(
                    place_of(*base, "dependency"),
                    "unknown_dependency",
                    f"no dependency {node.dependency!r} is declared",
                    _choices("declare it under `dependencies`; declared", a.dependencies),
                )
            elif node.tool not in dependency.tools:
                self.issue(
                    place_of(*base, "tool"),
                    "unknown_tool",
                    f"dependency {node.dependency!r} does not list tool {node.tool!r}",
                    f"add it to dependencies.{node.dependency}.tools",
                )
            self._object_template((*base, "arguments"), node.arguments, _BASE, node_id)
            self._assign(base, node.assign, _BASE | {"result"}, node_id)
        elif isinstance(node, SetNode):
            self._assign(base, node.assign, _BASE, node_id)
        elif isinstance(node, SwitchNode):
            for index, case in enumerate(node.cases):
                path = (*base, "cases", index, "when")
                condition = compile_condition(case.when, path, _BASE, self.issues)
                if condition is not None:
                    self._fields(condition, node_id)
                    self.conditions[place_of(*path)] = condition
        elif isinstance(node, InterruptNode):
            self._object_template((*base, "request"), node.request, _BASE, node_id)
            self._schema((*base, "resume_schema"), node.resume_schema)
            self._assign(base, node.assign, _BASE | {"resume"}, node_id)
        elif isinstance(node, WorkflowNode):
            if node.workflow not in a.children:
                self.issue(
                    place_of(*base, "workflow"),
                    "unknown_child",
                    f"child {node.workflow!r} is not declared",
                    "declare it under `children` with its exact version",
                )
            self._object_template((*base, "input"), node.input, _BASE, node_id)
            self._assign(base, node.assign, _BASE | {"result"}, node_id)
        elif isinstance(node, EndNode):
            template = self._object_template((*base, "output"), node.output, _BASE, node_id)
            if template is not None:
                self._end_output(base, node.output, template)

    def _label(self, base: tuple[str | int, ...], label: str | None) -> None:
        if label is None:
            return
        self._text((*base, "label"), label, MAX_LABEL_BYTES)
        if set("\x00\r\n") & set(label):
            self.issue(place_of(*base, "label"), "bad_label", "a label has no NUL, CR or LF")

    def _object_template(
        self, path: tuple[str | int, ...], value: Any, roots: frozenset[str], node_id: str
    ) -> Template | None:
        if isinstance(value, str) and not is_expression(value):
            self.issue(
                place_of(*path),
                "not_a_template",
                "must be an object, or one `${ ... }` expression giving an object",
            )
            return None
        return self._template(path, value, roots, node_id)

    def _template(
        self, path: tuple[str | int, ...], value: Any, roots: frozenset[str], node_id: str
    ) -> Template | None:
        template = compile_template(value, path, roots, self.issues)
        if template is None:
            return None
        for expression in template.expressions:
            self._fields(expression, node_id)
        self.templates[template.place] = template
        return template

    def _assign(
        self,
        base: tuple[str | int, ...],
        assign: Mapping[str, Any],
        roots: frozenset[str],
        node_id: str,
    ) -> None:
        for name, value in assign.items():
            path = (*base, "assign", name)
            if name not in self.artifact.state:
                self.issue(
                    place_of(*path),
                    "unknown_state_field",
                    f"state field {name!r} is not declared",
                    "declare it under `state`",
                )
            self._template(path, value, roots, node_id)

    def _fields(self, expression: Expression, node_id: str) -> None:
        """Check the first field each reference reads below its root name."""
        node = self.artifact.nodes[node_id]
        for chain in expression.references:
            if len(chain) < 2:
                continue
            root, name = chain[0], chain[1]
            allowed: Iterable[str] | None = None
            what = ""
            if root == "state":
                allowed, what = self.artifact.state, "declared state field"
            elif root == "input":
                allowed, what = self.input_properties, "property of input_schema"
            elif root == "resume" and isinstance(node, InterruptNode):
                allowed = closed_properties(node.resume_schema)
                what = "property of this node's resume_schema"
            elif root == "result" and isinstance(node, ToolNode):
                allowed, what = TOOL_RESULT_FIELDS, "field of a tool result"
            elif root == "result" and isinstance(node, WorkflowNode):
                allowed, what = WORKFLOW_RESULT_FIELDS, "field of a child's result"
            if allowed is not None and name not in allowed:
                self.issue(
                    expression.place,
                    "unknown_field",
                    f"`{root}.{name}`: {name!r} is not a {what}",
                    _choices(f"it would always be null; every {what}", allowed),
                )

    def _end_output(self, base: tuple[str | int, ...], output: Any, template: Template) -> None:
        if not isinstance(output, dict):
            return
        properties = self.output_properties
        if properties is not None:
            for key in output:
                if key not in properties:
                    self.issue(
                        place_of(*base, "output", key),
                        "unknown_field",
                        f"output_schema has no property {key!r}",
                        _choices("the output is a closed object; its properties", properties),
                    )
        required = self.artifact.output_schema.get("required", [])
        if isinstance(required, list):
            for key in required:
                if isinstance(key, str) and key not in output:
                    self.issue(
                        place_of(*base, "output"),
                        "field_missing",
                        f"the output lacks required property {key!r}",
                    )
        schema = self.schemas.get("output_schema")
        if template.is_literal and schema is not None:
            try:
                schema.validate(output)
            except SchemaValidationError as exc:
                self.issue(place_of(*base, "output"), "output_invalid", str(exc))

    # -- the graph ------------------------------------------------------------------

    def _references_resolve(self) -> bool:
        nodes = self.artifact.nodes
        ok = True
        if self.artifact.start not in nodes:
            ok = False
            self.issue(
                "start",
                "unknown_node",
                f"no node {self.artifact.start!r}",
                _choices("nodes", nodes),
            )
        for node_id, node in nodes.items():
            targets = list(_targets(node_id, node))
            if isinstance(node, ParallelNode):
                targets.append((node.join, ("nodes", node_id, "join")))
            for target, path in targets:
                if target not in nodes:
                    ok = False
                    self.issue(
                        place_of(*path),
                        "unknown_node",
                        f"no node {target!r}",
                        _choices("nodes", nodes),
                    )
        return ok

    def _graph(self) -> None:
        nodes = self.artifact.nodes
        seen = {self.artifact.start}
        pending = [self.artifact.start]
        while pending:
            for target, _ in _targets(current := pending.pop(), nodes[current]):
                if target not in seen:
                    seen.add(target)
                    pending.append(target)
        for node_id in nodes:
            if node_id not in seen:
                self.issue(
                    place_of("nodes", node_id),
                    "unreachable_node",
                    "no path from `start` reaches this node",
                    "remove it, or continue at it from another node",
                )
        ends = [node_id for node_id, node in nodes.items() if isinstance(node, EndNode)]
        if not ends:
            self.issue("nodes", "no_end", "there is no `end` node", "add one: a run must finish")
            return
        predecessors: dict[str, set[str]] = {}
        for node_id, node in nodes.items():
            for target, _ in _targets(node_id, node):
                predecessors.setdefault(target, set()).add(node_id)
        finishing = set(ends)
        pending = list(ends)
        while pending:
            for source in predecessors.get(pending.pop(), ()):
                if source not in finishing:
                    finishing.add(source)
                    pending.append(source)
        for node_id in nodes:
            if node_id in seen and node_id not in finishing:
                self.issue(
                    place_of("nodes", node_id),
                    "no_way_to_end",
                    "no `end` node can be reached from here: a run would never finish",
                    "give the loop an exit",
                )

    def _parallels(self) -> None:
        nodes = self.artifact.nodes
        joins: dict[str, str] = {}
        for node_id, node in nodes.items():
            if not isinstance(node, ParallelNode):
                continue
            base = ("nodes", node_id)
            if node.join in joins:
                self.issue(
                    place_of(*base, "join"),
                    "shared_join",
                    f"{node.join!r} is already the join of parallel {joins[node.join]!r}",
                )
            joins[node.join] = node_id
            if node.join == node_id or node.join in node.branches:
                self.issue(
                    place_of(*base, "join"),
                    "bad_join",
                    "the join is a node after the branches, not the parallel node or a branch",
                )
                continue
            if len(set(node.branches)) != len(node.branches):
                self.issue(place_of(*base, "branches"), "duplicate", "a branch is listed twice")
                continue
            regions = [self._region(node_id, node, index) for index in range(len(node.branches))]
            self.branches[node_id] = tuple(frozenset(region) for region in regions)
            self._branch_rules(node_id, node, regions)

    def _region(self, parallel_id: str, node: ParallelNode, index: int) -> set[str]:
        nodes = self.artifact.nodes
        branch = node.branches[index]
        region = {branch}
        pending = [branch]
        reaches_join = False
        while pending:
            current = pending.pop()
            for target, _ in _targets(current, nodes[current]):
                if target == node.join:
                    reaches_join = True
                elif target not in region:
                    region.add(target)
                    pending.append(target)
        if not reaches_join:
            self.issue(
                place_of("nodes", parallel_id, "branches", index),
                "branch_without_join",
                f"branch {branch!r} never reaches the join {node.join!r}",
                "every branch continues at the join when it is done",
            )
        return region

    def _branch_rules(self, parallel_id: str, node: ParallelNode, regions: list[set[str]]) -> None:
        nodes = self.artifact.nodes
        base = ("nodes", parallel_id)
        inside = set().union(*regions)
        for index, region in enumerate(regions):
            branch = node.branches[index]
            if parallel_id in region:
                self.issue(
                    place_of(*base, "branches", index),
                    "branch_loop",
                    f"branch {branch!r} leads back to its parallel node",
                )
            for member in sorted(region):
                current = nodes[member]
                if isinstance(current, EndNode):
                    self.issue(
                        place_of("nodes", member),
                        "end_in_branch",
                        f"an end node inside branch {branch!r} of parallel {parallel_id!r}",
                        "a branch continues at the join; end the run after the join",
                    )
                if isinstance(current, ParallelNode) and current.join not in region:
                    self.issue(
                        place_of("nodes", member, "join"),
                        "bad_join",
                        f"a parallel inside branch {branch!r} must join inside that branch",
                    )
            for other in range(index):
                shared = region & regions[other]
                if shared:
                    self.issue(
                        place_of(*base, "branches", index),
                        "shared_branch_node",
                        f"branches {node.branches[other]!r} and {branch!r} share "
                        f"{', '.join(repr(n) for n in sorted(shared)[:5])}",
                        "a node belongs to one branch",
                    )
        for source_id, source in nodes.items():
            if source_id == parallel_id:
                continue
            for target, path in _targets(source_id, source):
                for index, region in enumerate(regions):
                    if target in region and source_id not in region:
                        self.issue(
                            place_of(*path),
                            "into_branch",
                            f"{target!r} is inside branch {node.branches[index]!r} of parallel "
                            f"{parallel_id!r}",
                            "a branch is entered only through its parallel node",
                        )
                if target == node.join and source_id not in inside:
                    self.issue(
                        place_of(*path),
                        "into_join",
                        f"{target!r} is the join of parallel {parallel_id!r}; only its branches "
                        "continue there",
                    )
        written = [self._writes(region) for region in regions]
        for index in range(len(regions)):
            for other in range(index):
                for name in sorted(written[index] & written[other]):
                    spec = self.artifact.state.get(name)
                    if spec is not None and spec.reduce == "replace":
                        self.issue(
                            place_of(*base, "branches", index),
                            "conflicting_writes",
                            f"branches {node.branches[other]!r} and {node.branches[index]!r} "
                            f"both write state field {name!r}, whose reducer is replace",
                            f"set state.{name}.reduce to append, merge or sum, or write "
                            "different fields",
                        )

    def _writes(self, region: set[str]) -> set[str]:
        fields: set[str] = set()
        for member in region:
            current = self.artifact.nodes[member]
            assign = getattr(current, "assign", None)
            if isinstance(assign, dict):
                fields.update(assign)
        return fields


def _holds_expression(value: Any) -> bool:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str) and "${" in item:
            return True
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def _choices(prefix: str, names: Iterable[str]) -> str:
    shown = sorted(names)
    if not shown:
        return f"{prefix}: none"
    listed = ", ".join(shown[:12]) + (", ..." if len(shown) > 12 else "")
    return f"{prefix}: {listed}"


def check_child_contracts(
    validated: ValidatedArtifact, children: Mapping[str, ValidatedArtifact]
) -> list[ArtifactIssue]:
    """What can be checked once the saved children are known: each workflow node's
    ``input`` against the child's closed ``input_schema`` (property names, required
    properties, and the whole value when it is literal), and every ``result.output.<f>``
    it reads against the child's ``output_schema``."""
    issues: list[ArtifactIssue] = []
    for node_id, node in validated.artifact.nodes.items():
        if not isinstance(node, WorkflowNode) or node.workflow not in children:
            continue
        child = children[node.workflow]
        base = ("nodes", node_id, "input")
        given = node.input
        accepted = closed_properties(child.artifact.input_schema)
        if isinstance(given, dict):
            for key in given:
                if accepted is not None and key not in accepted:
                    issues.append(
                        ArtifactIssue(
                            place_of(*base, key),
                            "unknown_field",
                            f"child {child.name}@{child.version} has no input property {key!r}",
                            _choices("its input properties", accepted),
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
                                _choices("its output properties", outputs),
                            )
                        )
    return issues
