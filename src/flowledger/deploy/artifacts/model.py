"""The artifact format ``flowledger.artifact/v1``: its pydantic models.

These models are the structure (field names, types, grammars, counts); the JSON Schema
printed by ``flowledger artifact schema`` is generated from them. What a structure
check cannot see (references between nodes, reachability, expressions, schemas,
parallel branches) is checked by `flowledger.deploy.artifacts.validate`. Reference:
docs/deploy.md.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StringConstraints

from flowledger.flow.ids import VERTEX_ID
from flowledger.workflows.authoring.metadata import MAX_LABEL_BYTES, NAME_PATTERN, VERSION_PATTERN

from .limits import (
    MAX_BRANCHES,
    MAX_CASES,
    MAX_CHILDREN,
    MAX_DEPENDENCIES,
    MAX_FOREACH_CONCURRENCY,
    MAX_NODES,
    MAX_STATE_FIELDS,
    MAX_TOOLS_PER_DEPENDENCY,
)

__all__ = [
    "ARTIFACT_FORMAT",
    "DEFAULT_TOOL_TIMEOUT",
    "FOREACH_BODY_KINDS",
    "MAX_TOOL_TIMEOUT",
    "NODE_KINDS",
    "REDUCERS",
    "TOOL_NAME_PATTERN",
    "Artifact",
    "Backoff",
    "Case",
    "Dependency",
    "EndNode",
    "ForeachNode",
    "ForeachSequenceBody",
    "ForeachToolBody",
    "ForeachValueBody",
    "ForeachWorkflowBody",
    "InterruptNode",
    "Node",
    "OnError",
    "ParallelNode",
    "Retry",
    "SetNode",
    "StateField",
    "SwitchNode",
    "ToolNode",
    "WaitNode",
    "WorkflowNode",
]

ARTIFACT_FORMAT: Final = "flowledger.artifact/v1"
DEFAULT_TOOL_TIMEOUT: Final = 60.0
MAX_TOOL_TIMEOUT: Final = 3600.0
# MCP tool names: ASCII letters, digits, ``_``, ``-`` and ``.``, 1..128 characters.
TOOL_NAME_PATTERN: Final = r"^[A-Za-z0-9_.-]{1,128}$"
REDUCERS: Final = ("replace", "append", "merge", "sum")
NODE_KINDS: Final = (
    "tool",
    "set",
    "switch",
    "parallel",
    "interrupt",
    "wait",
    "workflow",
    "foreach",
    "end",
)
FOREACH_BODY_KINDS: Final = ("tool", "value", "workflow", "sequence")

NodeId = Annotated[str, StringConstraints(pattern=f"^{VERTEX_ID.pattern}$")]
FieldName = Annotated[str, StringConstraints(pattern=f"^{VERTEX_ID.pattern}$")]
DependencyName = Annotated[str, StringConstraints(pattern=f"^{VERTEX_ID.pattern}$")]
OutcomeName = Annotated[str, StringConstraints(pattern=f"^{VERTEX_ID.pattern}$")]
ArtifactName = Annotated[str, StringConstraints(pattern=f"^{NAME_PATTERN.pattern}$")]
Version = Annotated[str, StringConstraints(pattern=f"^{VERSION_PATTERN.pattern}$")]
ToolName = Annotated[str, StringConstraints(pattern=TOOL_NAME_PATTERN)]
Label = Annotated[str, StringConstraints(min_length=1, max_length=MAX_LABEL_BYTES)]
Description = Annotated[str, StringConstraints(max_length=1024)]
Schema = Annotated[
    dict[str, JsonValue],
    Field(description="A strict JSON Schema (Draft 2020-12): a closed object schema."),
]
ObjectTemplate = Annotated[
    dict[str, JsonValue] | str,
    Field(description="An object template, or one `${ ... }` expression giving an object."),
]
Assignments = Annotated[
    dict[FieldName, JsonValue],
    Field(
        description="State field -> template. Every field must be declared in `state`.",
        max_length=MAX_STATE_FIELDS,
    ),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Dependency(_Strict):
    """A logical MCP source the artifact needs, and the tools it uses from it. How to
    reach the source (stdio command, URL, credentials) belongs to a deployment."""

    description: Description = ""
    tools: Annotated[list[ToolName], Field(min_length=1, max_length=MAX_TOOLS_PER_DEPENDENCY)]


class StateField(_Strict):
    """A state field: how concurrent writes combine (``reduce``) and its first value
    (``initial``; omitted: ``null``, ``[]``, ``{}`` or ``0`` by reducer)."""

    reduce: Literal["replace", "append", "merge", "sum"] = "replace"
    initial: JsonValue = None


class _Node(_Strict):
    label: Label | None = Field(default=None, description="Display label (at most 64 bytes).")


class OnError(_Strict):
    """Where a failed call continues: node ``next``, after ``assign`` (evaluated with
    ``error`` = ``{kind, code, message, tool, attempt}`` in scope). ``kinds`` limits
    which failures are routed (omitted: every kind except ``outcome_unknown`` of a tool
    that is not read-only or idempotent); a failure not routed fails the run."""

    next: NodeId
    assign: Assignments = Field(default_factory=dict)
    kinds: Annotated[
        list[str] | None,
        Field(
            max_length=5,
            description="Failure kinds routed: tool_error, invalid_result, timeout, "
            "unavailable, outcome_unknown.",
        ),
    ] = None


class Backoff(_Strict):
    """Seconds before attempt ``n`` (n >= 2): ``min(max, initial * factor ** (n - 2))``."""

    initial: float = 1.0
    factor: float = 2.0
    max: float = 30.0


class Retry(_Strict):
    """Make up to ``attempts`` calls (the first included) while a failure's kind is in
    ``on`` and the retry table (docs/deploy.md, "Failures") allows it."""

    attempts: int
    backoff: Backoff = Field(default_factory=Backoff)
    on: Annotated[
        list[str],
        Field(
            max_length=5,
            description="Failure kinds retried (default: unavailable).",
        ),
    ] = Field(default_factory=lambda: ["unavailable"])


class ToolNode(_Node):
    """Call a tool of a declared dependency; ``result`` is ``{structured, content, text}``.
    ``retry`` repeats a failed call, ``on_error`` routes a failure to another node."""

    kind: Literal["tool"]
    dependency: DependencyName
    tool: ToolName
    arguments: ObjectTemplate = Field(default_factory=dict)
    assign: Assignments = Field(default_factory=dict)
    timeout: Annotated[float, Field(gt=0, le=MAX_TOOL_TIMEOUT)] = DEFAULT_TOOL_TIMEOUT
    retry: Retry | None = None
    on_error: OnError | None = None
    next: NodeId


class SetNode(_Node):
    """Compute state fields from expressions."""

    kind: Literal["set"]
    assign: Annotated[dict[FieldName, JsonValue], Field(min_length=1, max_length=MAX_STATE_FIELDS)]
    next: NodeId


class Case(_Strict):
    when: Annotated[str, Field(description="One `${ ... }` expression; JMESPath truth.")]
    next: NodeId


class SwitchNode(_Node):
    """The first case whose condition is true wins; none: ``default``."""

    kind: Literal["switch"]
    cases: Annotated[list[Case], Field(min_length=1, max_length=MAX_CASES)]
    default: NodeId


class ParallelNode(_Node):
    """Run every branch (in the same super-steps), then continue at ``join`` once every
    branch has reached it."""

    kind: Literal["parallel"]
    branches: Annotated[list[NodeId], Field(min_length=2, max_length=MAX_BRANCHES)]
    join: NodeId


class InterruptNode(_Node):
    """Pause the run; whoever resumes sees ``request`` and sends a payload matching
    ``resume_schema``, read as ``resume`` by ``assign``. With ``timeout`` (seconds) the
    pause has a deadline: once it passes, the run's owner resumes it with ``on_timeout``
    (a payload matching ``resume_schema``), unless a resume came first; the run then
    continues at ``timeout_next`` when given (after ``assign``), else at ``next``."""

    kind: Literal["interrupt"]
    request: ObjectTemplate = Field(default_factory=dict)
    resume_schema: Schema
    assign: Assignments = Field(default_factory=dict)
    timeout: Annotated[
        float | None,
        Field(description="Seconds until the deadline (> 0); needs `on_timeout`."),
    ] = None
    on_timeout: Annotated[
        dict[str, JsonValue] | None,
        Field(description="The resume payload the deadline sends (matches resume_schema)."),
    ] = None
    timeout_next: Annotated[
        NodeId | None,
        Field(description="Where the run continues when the deadline passed (default: next)."),
    ] = None
    next: NodeId


class WaitNode(_Node):
    """Park the run durably - no process holds it - until ``seconds`` have passed or
    until the time ``until``, then continue at ``next``. Exactly one of the two: a number
    or a `${ ... }` expression giving one (``seconds``), an RFC 3339 time with an offset
    or an expression giving one (``until``)."""

    kind: Literal["wait"]
    seconds: Annotated[
        float | str | None,
        Field(description="Seconds (>= 0), or one `${ ... }` expression giving them."),
    ] = None
    until: Annotated[
        str | None,
        Field(description="RFC 3339 time with an offset, or one `${ ... }` expression."),
    ] = None
    next: NodeId


class WorkflowNode(_Node):
    """Run a saved child artifact; ``result`` is ``{outcome, output}``."""

    kind: Literal["workflow"]
    workflow: ArtifactName
    input: ObjectTemplate = Field(default_factory=dict)
    assign: Assignments = Field(default_factory=dict)
    next: NodeId


class ForeachToolBody(_Strict):
    """Per item: call a tool of a declared dependency; the item's result is
    ``{structured, text}`` of the tool's answer."""

    kind: Literal["tool"]
    dependency: DependencyName
    tool: ToolName
    arguments: ObjectTemplate = Field(default_factory=dict)
    timeout: Annotated[float, Field(gt=0, le=MAX_TOOL_TIMEOUT)] = DEFAULT_TOOL_TIMEOUT


class ForeachValueBody(_Strict):
    """Per item: the item's result is the template ``value`` (pure, no side effect)."""

    kind: Literal["value"]
    value: JsonValue


class ForeachWorkflowBody(_Strict):
    """Per item: run the declared child ``workflow`` (its version pinned under the
    artifact's ``children``) with ``input``; the item's result is the child's ``{outcome,
    output}``. The child's closure may not hold an interrupt node (checked at save)."""

    kind: Literal["workflow"]
    workflow: ArtifactName
    input: ObjectTemplate = Field(default_factory=dict)


class ForeachSequenceBody(_Strict):
    """Per item: run the inline nodes from ``start`` until an ``end`` node; the item's
    result is ``{outcome, output}`` of that end node, as a child body's. Inside, ``item``
    and ``index`` are in scope, ``input`` is the run's input and ``state`` the item's own
    fields (declared here, fresh for every item). No node inside may pause or run a child
    artifact (``interrupt``, ``workflow`` nodes and foreach workflow bodies are refused)."""

    kind: Literal["sequence"]
    state: Annotated[dict[FieldName, StateField], Field(max_length=MAX_STATE_FIELDS)] = Field(
        default_factory=dict
    )
    start: NodeId
    nodes: Annotated[dict[NodeId, Node], Field(min_length=1, max_length=MAX_NODES)]


ForeachBody = Annotated[
    ForeachToolBody | ForeachValueBody | ForeachWorkflowBody | ForeachSequenceBody,
    Field(discriminator="kind"),
]


class ForeachNode(_Node):
    """Run ``body`` once per element of the list ``items`` gives (``item`` and ``index``
    in the body's scope), ``serial``ly or ``concurrent``ly (at most ``max_concurrency``
    at once), and put the results, in item order, into state field ``into``."""

    kind: Literal["foreach"]
    items: Annotated[str, Field(description="One `${ ... }` expression giving an array.")]
    body: ForeachBody
    mode: Literal["serial", "concurrent"] = "serial"
    max_concurrency: Annotated[
        int, Field(ge=1, description=f"Items at once (concurrent), 1 to {MAX_FOREACH_CONCURRENCY}.")
    ] = 4
    on_item_error: Literal["fail", "skip", "collect"] = "fail"
    into: FieldName
    next: NodeId


class EndNode(_Node):
    """Finish the run with a named outcome and an output matching ``output_schema``."""

    kind: Literal["end"]
    outcome: OutcomeName
    output: ObjectTemplate = Field(default_factory=dict)


Node = Annotated[
    ToolNode
    | SetNode
    | SwitchNode
    | ParallelNode
    | InterruptNode
    | WaitNode
    | WorkflowNode
    | ForeachNode
    | EndNode,
    Field(discriminator="kind"),
]


class Artifact(_Strict):
    """A declarative workflow definition (``flowledger.artifact/v1``)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        strict=True,
        title="flowledger artifact",
        json_schema_extra={"$comment": "Reference: docs/deploy.md"},
    )

    format: Literal["flowledger.artifact/v1"]
    name: ArtifactName
    version: Version
    description: Description = ""
    input_schema: Schema
    output_schema: Schema
    dependencies: Annotated[
        dict[DependencyName, Dependency], Field(max_length=MAX_DEPENDENCIES)
    ] = Field(default_factory=dict)
    children: Annotated[
        dict[ArtifactName, Version],
        Field(max_length=MAX_CHILDREN, description="Saved child artifact name -> exact version."),
    ] = Field(default_factory=dict)
    state: Annotated[dict[FieldName, StateField], Field(max_length=MAX_STATE_FIELDS)] = Field(
        default_factory=dict
    )
    start: NodeId
    nodes: Annotated[dict[NodeId, Node], Field(min_length=1, max_length=MAX_NODES)]

    def canonical_data(self) -> dict[str, Any]:
        """The stored form: JSON data with every default left out, so documents that mean
        the same (YAML or JSON, defaults written or not) have the same bytes."""
        return self.model_dump(mode="json", exclude_defaults=True)


# A sequence body holds nodes, and a node may be a foreach with a sequence body.
ForeachSequenceBody.model_rebuild()
ForeachNode.model_rebuild()
Artifact.model_rebuild()
