"""The semantic checks of one artifact, once its structure is sound: texts, schemas,
state, dependencies and children, every node's templates and conditions, the fields
expressions read, end outputs; then the graph (`flowledger.deploy.artifacts.graph`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final

import rfc8785

from flowledger.flow.context import MAX_WAIT_SECONDS
from flowledger.workflows.authoring.metadata import MAX_DESCRIPTION_BYTES, MAX_LABEL_BYTES
from flowledger.workflows.authoring.schema import (
    CompiledSchema,
    SchemaValidationError,
    compile_schema,
)
from flowledger.workflows.errors import InvalidSchemaError

from .contracts import closed_properties
from .errors import ArtifactIssue, choices, place_of
from .expressions import Expression, Template, compile_condition, compile_template, is_expression
from .failures import FAILURE_KINDS, MAX_ATTEMPTS, MAX_BACKOFF_FACTOR, MAX_BACKOFF_SECONDS
from .graph import check_graph
from .limits import MAX_EXPRESSIONS, MAX_FOREACH_CONCURRENCY
from .model import (
    Artifact,
    EndNode,
    ForeachNode,
    ForeachSequenceBody,
    ForeachToolBody,
    ForeachWorkflowBody,
    InterruptNode,
    Node,
    SetNode,
    SwitchNode,
    ToolNode,
    WaitNode,
    WorkflowNode,
)
from .sequence import SEQUENCE_NODE_KINDS, as_artifact, sequence_nodes
from .validated import ValidatedArtifact

__all__ = [
    "ERROR_FIELDS",
    "FOREACH_ITEM_ROOTS",
    "TOOL_RESULT_FIELDS",
    "WORKFLOW_RESULT_FIELDS",
    "Checker",
]

TOOL_RESULT_FIELDS: Final = frozenset({"structured", "content", "text"})
ERROR_FIELDS: Final = frozenset({"kind", "code", "message", "tool", "attempt"})
WORKFLOW_RESULT_FIELDS: Final = frozenset({"outcome", "output"})
_BASE: Final = frozenset({"input", "state"})
# A foreach body's scope: the node's, plus the element and its position in the list.
_ITEM: Final = frozenset({"item", "index"})
FOREACH_ITEM_ROOTS: Final = _BASE | _ITEM


class Checker:
    """The checks of ``artifact``; with ``sequence``, of a foreach's sequence body as
    its anonymous artifact (`flowledger.deploy.artifacts.sequence`): ``item`` and
    ``index`` in scope, ``input_properties`` the parent's, and what the parent checks
    for its whole tree (description, schemas, dependencies, children, the expression
    count) left to the parent."""

    def __init__(
        self,
        artifact: Artifact,
        *,
        sequence: bool = False,
        input_properties: frozenset[str] | None = None,
    ) -> None:
        self.artifact = artifact
        self.sequence = sequence
        self.base = _BASE | _ITEM if sequence else _BASE
        self.sequences: dict[str, ValidatedArtifact] = {}
        self.expression_count = 0
        self.issues: list[ArtifactIssue] = []
        self.templates: dict[str, Template] = {}
        self.conditions: dict[str, Expression] = {}
        self.schemas: dict[str, CompiledSchema] = {}
        self.branches: dict[str, tuple[frozenset[str], ...]] = {}
        self._nested: list[Checker] = []
        self.input_properties: frozenset[str] | None = input_properties
        self.output_properties: frozenset[str] | None = None

    def issue(self, place: str, code: str, message: str, hint: str = "") -> None:
        self.issues.append(ArtifactIssue(place, code, message, hint))

    def run(self) -> None:
        a = self.artifact
        if not self.sequence:
            self._text(("description",), a.description, MAX_DESCRIPTION_BYTES)
            self.input_properties = self._schema(("input_schema",), a.input_schema)
            self.output_properties = self._schema(("output_schema",), a.output_schema)
        self._state()
        if not self.sequence:
            self._dependencies_and_children()
        for node_id, node in a.nodes.items():
            self._node(node_id, node)
        count = sum(len(t.expressions) for t in self.templates.values()) + len(self.conditions)
        count += sum(nested.expression_count for nested in self._nested)
        self.expression_count = count
        if count > MAX_EXPRESSIONS and not self.sequence:
            self.issue(
                "nodes",
                "too_many_expressions",
                f"{count} expressions; the limit is {MAX_EXPRESSIONS}",
            )
        self.branches = check_graph(self.artifact, self.issues)

    def validated(self, canonical: bytes) -> ValidatedArtifact:
        """The checked artifact with its compiled parts (once `run` found no issue)."""
        return ValidatedArtifact(
            self.artifact,
            canonical,
            hashlib.sha256(canonical).hexdigest(),
            MappingProxyType(self.templates),
            MappingProxyType(self.conditions),
            MappingProxyType(self.schemas),
            MappingProxyType(self.branches),
            MappingProxyType(self.sequences),
        )

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
        for node in sequence_nodes(a.nodes):  # a sequence body's nodes use them too
            if isinstance(node, ToolNode):
                used_tools.setdefault(node.dependency, set()).add(node.tool)
            elif isinstance(node, ForeachNode) and isinstance(node.body, ForeachToolBody):
                used_tools.setdefault(node.body.dependency, set()).add(node.body.tool)
            elif isinstance(node, WorkflowNode):
                used_children.add(node.workflow)
            elif isinstance(node, ForeachNode) and isinstance(node.body, ForeachWorkflowBody):
                used_children.add(node.body.workflow)
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
                    "no workflow node or foreach body runs this child",
                    "remove it",
                )

    def _node(self, node_id: str, node: Node) -> None:
        base: tuple[str | int, ...] = ("nodes", node_id)
        self._label(base, node.label)
        if self.sequence:
            self._sequence_member(base, node)
        if isinstance(node, ToolNode):
            self._tool_reference(base, node.dependency, node.tool)
            self._object_template((*base, "arguments"), node.arguments, self.base, node_id)
            self._assign(base, node.assign, self.base | {"result"}, node_id)
            self._failures(base, node, node_id)
        elif isinstance(node, SetNode):
            self._assign(base, node.assign, self.base, node_id)
        elif isinstance(node, SwitchNode):
            for index, case in enumerate(node.cases):
                path = (*base, "cases", index, "when")
                condition = compile_condition(case.when, path, self.base, self.issues)
                if condition is not None:
                    self._fields(condition, node_id)
                    self.conditions[place_of(*path)] = condition
        elif isinstance(node, InterruptNode):
            self._object_template((*base, "request"), node.request, self.base, node_id)
            self._schema((*base, "resume_schema"), node.resume_schema)
            self._assign(base, node.assign, self.base | {"resume"}, node_id)
            self._deadline(base, node)
        elif isinstance(node, WaitNode):
            self._wait(base, node_id, node)
        elif isinstance(node, WorkflowNode):
            self._child_reference(base, node.workflow)
            self._object_template((*base, "input"), node.input, self.base, node_id)
            self._assign(base, node.assign, self.base | {"result"}, node_id)
        elif isinstance(node, ForeachNode):
            self._foreach(base, node_id, node)
        elif isinstance(node, EndNode):
            template = self._object_template((*base, "output"), node.output, self.base, node_id)
            if template is not None:
                self._end_output(base, node.output, template)

    def _deadline(self, base: tuple[str | int, ...], node: InterruptNode) -> None:
        """``timeout`` and ``on_timeout`` come together; the payload matches the schema;
        ``timeout_next`` needs a timeout (that it names a node is a graph check)."""
        if node.timeout is None and node.timeout_next is not None:
            self.issue(
                place_of(*base, "timeout_next"),
                "interrupt_timeout",
                "timeout_next needs a timeout (seconds until the deadline)",
                "add timeout: 3600 and on_timeout, or remove timeout_next",
            )
        if node.timeout is None and node.on_timeout is None:
            return
        if node.timeout is None:
            self.issue(
                place_of(*base, "timeout"),
                "interrupt_timeout",
                "on_timeout needs a timeout (seconds until the deadline)",
                "add timeout: 3600, or remove on_timeout",
            )
            return
        if not 0 < node.timeout <= MAX_WAIT_SECONDS:
            self.issue(
                place_of(*base, "timeout"),
                "interrupt_timeout",
                f"timeout must be more than 0 and at most {MAX_WAIT_SECONDS} seconds",
            )
        if node.on_timeout is None:
            self.issue(
                place_of(*base, "on_timeout"),
                "interrupt_timeout",
                "a timeout needs on_timeout: the resume payload its deadline sends",
                "add on_timeout: a payload matching resume_schema",
            )
            return
        schema = self.schemas.get(place_of(*base, "resume_schema"))
        if schema is None:
            return  # the schema's own issue is reported
        try:
            schema.validate(node.on_timeout)
        except SchemaValidationError as exc:
            self.issue(
                place_of(*base, "on_timeout"),
                "interrupt_timeout",
                f"on_timeout does not match resume_schema: {exc}",
                "send what a person resuming it would: a payload resume_schema accepts",
            )

    def _wait(self, base: tuple[str | int, ...], node_id: str, node: WaitNode) -> None:
        """Exactly one of ``seconds`` and ``until``; literals checked now, expressions
        compiled (their values are checked when the node runs)."""
        if (node.seconds is None) == (node.until is None):
            self.issue(
                place_of(*base),
                "wait_time",
                "a wait node needs exactly one of seconds and until",
                "seconds: 3600, or until: '${ input.due }'",
            )
            return
        if node.seconds is not None:
            path = (*base, "seconds")
            value: Any = node.seconds
            if isinstance(value, str) and not is_expression(value):
                self.issue(
                    place_of(*path), "wait_time", "seconds is a number or one `${ ... }` expression"
                )
                return
            if not isinstance(value, str) and not 0 <= value <= MAX_WAIT_SECONDS:
                self.issue(
                    place_of(*path),
                    "wait_time",
                    f"seconds must be in 0..{MAX_WAIT_SECONDS} (a wait cannot go back in time)",
                )
                return
            self._template(path, value, self.base, node_id)
            return
        path = (*base, "until")
        assert node.until is not None
        if not is_expression(node.until):
            try:
                parsed = datetime.fromisoformat(node.until)
            except ValueError:
                parsed = None
            if parsed is None or parsed.utcoffset() is None:
                self.issue(
                    place_of(*path),
                    "wait_time",
                    "until is an RFC 3339 time with an offset (2026-01-01T09:00:00Z) or one "
                    "`${ ... }` expression",
                )
                return
        self._template(path, node.until, self.base, node_id)

    def _child_reference(self, base: tuple[str | int, ...], name: str) -> None:
        if name not in self.artifact.children:
            self.issue(
                place_of(*base, "workflow"),
                "unknown_child",
                f"child {name!r} is not declared",
                "declare it under `children` with its exact version",
            )

    def _tool_reference(self, base: tuple[str | int, ...], dependency_name: str, tool: str) -> None:
        dependencies = self.artifact.dependencies
        dependency = dependencies.get(dependency_name)
        if dependency is None:
            self.issue(
                place_of(*base, "dependency"),
                "unknown_dependency",
                f"no dependency {dependency_name!r} is declared",
                choices("declare it under `dependencies`; declared", dependencies),
            )
        elif tool not in dependency.tools:
            self.issue(
                place_of(*base, "tool"),
                "unknown_tool",
                f"dependency {dependency_name!r} does not list tool {tool!r}",
                f"add it to dependencies.{dependency_name}.tools",
            )

    def _foreach(self, base: tuple[str | int, ...], node_id: str, node: ForeachNode) -> None:
        path = (*base, "items")
        items = compile_condition(node.items, path, self.base, self.issues)
        if items is not None:
            self._fields(items, node_id)
            self.conditions[place_of(*path)] = items
        body = (*base, "body")
        if isinstance(node.body, ForeachToolBody):
            self._tool_reference(body, node.body.dependency, node.body.tool)
            self._object_template(
                (*body, "arguments"), node.body.arguments, self.base | _ITEM, node_id
            )
        elif isinstance(node.body, ForeachWorkflowBody):
            self._child_reference(body, node.body.workflow)
            self._object_template((*body, "input"), node.body.input, self.base | _ITEM, node_id)
        elif isinstance(node.body, ForeachSequenceBody):
            self._sequence(body, node_id, node.body)
        else:
            self._template((*body, "value"), node.body.value, self.base | _ITEM, node_id)
        if node.max_concurrency > MAX_FOREACH_CONCURRENCY:
            self.issue(
                place_of(*base, "max_concurrency"),
                "foreach_concurrency",
                f"{node.max_concurrency} items at once; the limit is {MAX_FOREACH_CONCURRENCY}",
                f"use 1 to {MAX_FOREACH_CONCURRENCY}",
            )
        elif node.mode == "serial" and "max_concurrency" in node.model_fields_set:
            self.issue(
                place_of(*base, "max_concurrency"),
                "foreach_concurrency",
                "a serial foreach runs one item at a time",
                "remove max_concurrency, or set mode: concurrent",
            )
        into = self.artifact.state.get(node.into)
        if into is None:
            self.issue(
                place_of(*base, "into"),
                "unknown_state_field",
                f"state field {node.into!r} is not declared",
                "declare it under `state`",
            )
        elif into.reduce != "replace":
            self.issue(
                place_of(*base, "into"),
                "foreach_into",
                f"state field {node.into!r} has reducer {into.reduce}; a foreach replaces "
                "its `into` field with the whole list of results",
                f"set state.{node.into}.reduce to replace, or collect into another field",
            )

    def _sequence(
        self, path: tuple[str | int, ...], node_id: str, body: ForeachSequenceBody
    ) -> None:
        """A sequence body: checked as its anonymous artifact, its issues placed under
        ``path`` (``nodes.each.body.nodes.call.arguments``)."""
        nested = Checker(
            as_artifact(self.artifact, body),
            sequence=True,
            input_properties=self.input_properties,
        )
        nested.run()
        self._nested.append(nested)
        prefix = place_of(*path)
        self.issues.extend(
            ArtifactIssue(f"{prefix}.{issue.place}", issue.code, issue.message, issue.hint)
            for issue in nested.issues
        )
        if not nested.issues:
            canonical = rfc8785.dumps(nested.artifact.canonical_data())
            self.sequences[node_id] = nested.validated(canonical)

    def _sequence_member(self, base: tuple[str | int, ...], node: Node) -> None:
        """What a sequence may not hold: a node that pauses, or a child artifact."""
        if node.kind not in SEQUENCE_NODE_KINDS:
            self.issue(
                place_of(*base, "kind"),
                "foreach_sequence_node",
                f"a sequence body cannot hold {node.kind} nodes: "
                + (
                    "a foreach item cannot pause"
                    if isinstance(node, InterruptNode)
                    else "a sequence runs no child artifact"
                ),
                "ask before or after the foreach; to run a saved child per item, use "
                "body: {kind: workflow, ...}; a sequence holds "
                + ", ".join(SEQUENCE_NODE_KINDS)
                + " nodes",
            )
        elif isinstance(node, ForeachNode) and isinstance(node.body, ForeachWorkflowBody):
            self.issue(
                place_of(*base, "body", "kind"),
                "foreach_sequence_node",
                "a foreach inside a sequence body cannot run a child artifact per item",
                "use a tool, value or sequence body here, or make the whole item a "
                "saved child (body: {kind: workflow, ...}) of the outer foreach",
            )

    def _failures(self, base: tuple[str | int, ...], node: ToolNode, node_id: str) -> None:
        """``retry`` and ``on_error``: known kinds, listed once, bounds (what needs the
        tool's annotations is checked when a deployment starts a run)."""
        if node.on_error is not None:
            on_error = (*base, "on_error")
            self._assign(on_error, node.on_error.assign, self.base | {"error"}, node_id)
            if node.on_error.kinds is not None:
                self._kinds((*on_error, "kinds"), node.on_error.kinds)
        retry = node.retry
        if retry is None:
            return
        path = (*base, "retry")
        if not 1 <= retry.attempts <= MAX_ATTEMPTS:
            self.issue(
                place_of(*path, "attempts"),
                "retry_out_of_range",
                f"attempts is {retry.attempts}; it is 1..{MAX_ATTEMPTS} (the first call included)",
                f"use at most {MAX_ATTEMPTS} attempts, or route the failure with on_error",
            )
        backoff = retry.backoff
        for name, value, low, high in (
            ("initial", backoff.initial, 0.0, MAX_BACKOFF_SECONDS),
            ("factor", backoff.factor, 1.0, MAX_BACKOFF_FACTOR),
            ("max", backoff.max, 0.0, MAX_BACKOFF_SECONDS),
        ):
            if not low <= value <= high:
                self.issue(
                    place_of(*path, "backoff", name),
                    "retry_out_of_range",
                    f"backoff.{name} is {value:g}; it is {low:g}..{high:g}",
                    "backoff waits min(max, initial * factor ** (attempt - 2)) seconds",
                )
        if backoff.max < backoff.initial:
            self.issue(
                place_of(*path, "backoff", "max"),
                "retry_out_of_range",
                f"backoff.max ({backoff.max:g}) is less than backoff.initial ({backoff.initial:g})",
                "max bounds the growing wait; make it at least initial",
            )
        if not retry.on:
            self.issue(
                place_of(*path, "on"),
                "retry_out_of_range",
                "retry.on lists no failure kind: nothing would be retried",
                "list the kinds to retry, e.g. [unavailable], or remove retry",
            )
        self._kinds((*path, "on"), retry.on)

    def _kinds(self, path: tuple[str | int, ...], kinds: list[str]) -> None:
        seen: set[str] = set()
        for index, kind in enumerate(kinds):
            if kind not in FAILURE_KINDS:
                self.issue(
                    place_of(*path, index),
                    "unknown_failure_kind",
                    f"{kind!r} is not a failure kind",
                    choices("the kinds", FAILURE_KINDS),
                )
            elif kind in seen:
                self.issue(place_of(*path, index), "duplicate", f"{kind!r} is listed twice")
            seen.add(kind)

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
            elif root == "error" and isinstance(node, ToolNode):
                allowed, what = ERROR_FIELDS, "field of a tool failure"
            elif root == "result" and isinstance(node, WorkflowNode):
                allowed, what = WORKFLOW_RESULT_FIELDS, "field of a child's result"
            if allowed is not None and name not in allowed:
                self.issue(
                    expression.place,
                    "unknown_field",
                    f"`{root}.{name}`: {name!r} is not a {what}",
                    choices(f"it would always be null; every {what}", allowed),
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
                        choices("the output is a closed object; its properties", properties),
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
