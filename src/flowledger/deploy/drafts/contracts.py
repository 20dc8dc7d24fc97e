"""A draft checked against the catalog: what its tool nodes call, with what, and what
they read back, compared with the registered sources' last probes.

`check_contracts` takes a draft whose artifact checks passed (a `ValidatedArtifact`),
the draft's bindings (dependency -> registered source) and a reader of a source's last
successful probe (which enforces what the session may see), and answers
`ContractCheck`: diagnostics in the shape of `flowledger.deploy.drafts.diagnostics`,
each with the next actions that fix it, and the capabilities the draft uses with their
contract fingerprints. It reads stored probes only: nothing is started or contacted.

The checks, each placed where the model would edit:

1. each dependency is bound (``binding_missing``) to a source the session sees
   (``source_missing``), enabled (``source_disabled``), with a successful probe
   (``probe_missing``), at
   ``dependencies.<d>``; each tool a node calls is listed by that probe
   (``capability_missing``, at ``nodes.<n>.tool``);
2. the literal members of a node's ``arguments`` validate against the tool's input
   schema (``argument_invalid``, at ``nodes.<n>.arguments.<a>``; members that are
   expressions are known only at run time and count as present), and every required
   argument is given (``argument_missing``, at ``nodes.<n>.arguments.<a>``, where the
   patch adding it goes);
3. an argument that is one plain path expression whose type can be traced (an
   ``input`` property typed by ``input_schema``; a ``state`` field by its reducer and
   the types of everything assigned to it; ``result.structured.<path>`` by the tool's
   output schema; ``result.text``; ``resume.<path>`` by the node's ``resume_schema``)
   fits the ``type`` the argument's schema declares (``argument_type``). Conservative:
   reported only when no traced type fits (an optional input may be null; a ``number``
   may be integral, so it is not reported against ``integer``);
4. every ``result.structured.<path>`` a tool node's ``assign`` reads is declared by the
   tool's output schema, when it declares one (``result_path_unknown``, at the
   expression). A level is taken as declaring its members when it has ``properties``
   and neither ``patternProperties`` nor a schema for ``additionalProperties``.
   (``result`` is in scope only in a tool or workflow node's ``assign``.)
5. ``recorded`` (the capabilities recorded by an earlier check) against the probes
   now: a tool of the same dependency and source whose contract fingerprint differs is
   ``contract_changed``, naming source, tool, old and new fingerprint.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import jsonschema  # type: ignore[import-untyped, unused-ignore]
import referencing.exceptions  # jsonschema's own dependency: its $ref resolution errors

from ..artifacts.errors import ArtifactIssue, choices, place_of
from ..artifacts.expressions import Expression
from ..artifacts.model import Artifact, InterruptNode, ToolNode
from ..artifacts.validated import ValidatedArtifact
from ..registry.store import Probe
from ..sources.errors import SourceError
from ..sources.tool_info import ToolInfo
from .diagnostics import action, diagnostic
from .errors import ProbeMissingError
from .skeleton import input_reference

__all__ = [
    "ARGUMENT_INVALID",
    "ARGUMENT_MISSING",
    "ARGUMENT_TYPE",
    "CONTRACT_CHANGED",
    "RESULT_PATH_UNKNOWN",
    "ContractCheck",
    "ProbeReader",
    "check_contracts",
]

ARGUMENT_INVALID: Final = "argument_invalid"
ARGUMENT_MISSING: Final = "argument_missing"
ARGUMENT_TYPE: Final = "argument_type"
RESULT_PATH_UNKNOWN: Final = "result_path_unknown"
CONTRACT_CHANGED: Final = "contract_changed"

#: A source's last successful probe as the session may see it; raises `SourceError`
#: (``source_missing``, ...) or `ProbeMissingError`.
ProbeReader = Callable[[str], Awaitable[Probe]]

_JSON_TYPES: Final = frozenset(
    {"string", "number", "integer", "boolean", "object", "array", "null"}
)
_REDUCED: Final = {"append": "array", "merge": "object", "sum": "number"}
_MAX_SHOWN: Final = 20
_MAX_VALIDATORS: Final = 256
_VALIDATORS: dict[str, Any] = {}  # full fingerprint -> validator (None: invalid schema)
_MAX_REMEMBERED: Final = 4096
_MAX_REMEMBERED_CHARS: Final = 4096
_ERRORS: dict[tuple[str, str], tuple[_Error, ...] | None] = {}


@dataclass(frozen=True, slots=True)
class ContractCheck:
    """The diagnostics of the checks, and the capabilities used (each
    ``{dependency, source, probe_revision, tool, contract_fingerprint}``, by dependency
    and tool)."""

    diagnostics: tuple[dict[str, Any], ...] = ()
    capabilities: tuple[dict[str, Any], ...] = ()


@dataclass
class _Checker:
    validated: ValidatedArtifact
    draft: str
    revision: int
    diagnostics: list[dict[str, Any]] = field(default_factory=list)

    @property
    def artifact(self) -> Artifact:
        return self.validated.artifact

    def add(
        self,
        place: str,
        code: str,
        message: str,
        hint: str,
        actions: Sequence[dict[str, Any]] = (),
    ) -> None:
        issue = ArtifactIssue(place, code, message, hint)
        self.diagnostics.append(diagnostic(issue, self.draft, actions))

    def patch(self, *operations: dict[str, Any]) -> dict[str, Any]:
        return action(
            "draft_patch", draft=self.draft, revision=self.revision, operations=list(operations)
        )

    # -- 2: literal arguments -----------------------------------------------------------

    def derived(self, name: str) -> str | None:
        """The expression a same-named state field or input property gives for argument
        ``name`` (state first, as draft_add_tool maps them)."""
        if name in self.artifact.state:
            return input_reference("state", name)
        properties = self.artifact.input_schema.get("properties")
        if isinstance(properties, dict) and name in properties:
            return input_reference("input", name)
        return None

    def arguments(self, node_id: str, node: ToolNode, info: ToolInfo, source: str) -> None:
        if not isinstance(node.arguments, dict):
            return  # one expression giving the whole object: known at run time only
        base = ("nodes", node_id, "arguments")
        inspect = action("capability_inspect", source=source, tool=info.name)
        schema = dict(info.input_schema)
        given = node.arguments
        dynamic = {key for key, value in given.items() if _holds_expression(value)}
        literal = {key: value for key, value in given.items() if key not in dynamic}
        errors = _errors(info, literal)
        if errors is None:
            return  # the source's own fault; the deployment check reports it
        pointer = f"/nodes/{_escape(node_id)}/arguments"
        reported: set[tuple[Any, ...]] = set()
        for error in errors:
            path = list(error.path)
            if not path and error.validator == "required":
                for name in error.validator_value:
                    if not isinstance(name, str) or name in given:
                        continue
                    expression = self.derived(name)
                    fix = (
                        [
                            self.patch(
                                {
                                    "op": "add",
                                    "path": f"{pointer}/{_escape(name)}",
                                    "value": expression,
                                }
                            )
                        ]
                        if expression is not None
                        else []
                    )
                    self.add(
                        place_of(*base, name),  # where it goes: the pointer the add names
                        ARGUMENT_MISSING,
                        f"{info.name} of source {source!r} requires argument {name!r}",
                        f"add arguments.{name} (capability_inspect shows its schema)",
                        [*fix, inspect],
                    )
                continue
            if not path and error.validator == "additionalProperties":
                continue  # below, for every argument (an expression is no more accepted)
            if (path and path[0] in dynamic) or tuple(path) in reported:
                continue
            reported.add(tuple(path))  # one diagnostic per argument (type and enum, ...)
            name = str(path[0]) if path else None
            expression = self.derived(name) if name is not None else None
            fix = (
                [
                    self.patch(
                        {"op": "replace", "path": f"{pointer}/{_escape(name)}", "value": expression}
                    )
                ]
                if name is not None and expression is not None
                else []
            )
            self.add(
                place_of(*base, *path),
                ARGUMENT_INVALID,
                f"{info.name} of source {source!r}: {error.json_path.replace('$', 'arguments', 1)}"
                f": {error.message}",
                "give a value the tool's input schema accepts (capability_inspect shows it)",
                [*fix, inspect],
            )
        declared = schema.get("properties")
        known = declared if isinstance(declared, dict) else {}
        if schema.get("additionalProperties") is False and "patternProperties" not in schema:
            for name in given:
                if name not in known:
                    self.add(
                        place_of(*base, name),
                        ARGUMENT_INVALID,
                        f"{info.name} of source {source!r} takes no argument {name!r}",
                        choices("remove it; its arguments", known),
                        [
                            self.patch({"op": "remove", "path": f"{pointer}/{_escape(name)}"}),
                            inspect,
                        ],
                    )

    # -- 3: traced types ----------------------------------------------------------------

    def argument_types(
        self, node_id: str, node: ToolNode, info: ToolInfo, source: str, tracer: _Tracer
    ) -> None:
        if not isinstance(node.arguments, dict):
            return
        properties = info.input_schema.get("properties")
        template = self.validated.templates.get(place_of("nodes", node_id, "arguments"))
        if not isinstance(properties, Mapping) or template is None:
            return
        # a member that is one expression (one nested inside a member is not its type)
        by_place = {expression.place: expression for expression in template.expressions}
        for name in node.arguments:
            expression = by_place.get(place_of("nodes", node_id, "arguments", name))
            wanted = _declared_types(properties.get(name))
            if expression is None or wanted is None:
                continue
            traced = tracer.expression(expression, node_id)
            if traced is None or any(_fits(kind, wanted) for kind in traced):
                continue
            self.add(
                expression.place,
                ARGUMENT_TYPE,
                f"`{expression.source}` is {_either(traced)}, but {info.name} of source "
                f"{source!r} takes {_either(wanted)} as {name!r}",
                "read a field of the type the tool takes, or convert it (to_string(...), "
                "to_number(...))",
                [action("capability_inspect", source=source, tool=info.name)],
            )

    # -- 4: result paths ----------------------------------------------------------------

    def result_paths(self, node_id: str, node: ToolNode, info: ToolInfo, source: str) -> None:
        output = info.output_schema
        if output is None:
            return
        for field_name in node.assign:
            template = self.validated.templates.get(
                place_of("nodes", node_id, "assign", field_name)
            )
            for expression in template.expressions if template is not None else ():
                for chain in expression.references:
                    if chain[:2] != ("result", "structured"):
                        continue
                    missing = _undeclared(output, chain[2:])
                    if missing is None:
                        continue
                    at, declared = missing
                    path = ".".join(("structured", *chain[2 : 2 + at + 1]))
                    self.add(
                        expression.place,
                        RESULT_PATH_UNKNOWN,
                        f"{info.name} of source {source!r} declares no `result.{path}` in its "
                        "output schema",
                        choices("read a declared field; there", declared),
                        [action("capability_inspect", source=source, tool=info.name)],
                    )


class _Tracer:
    """The JSON types an expression can have, where they can be told (``None``: not)."""

    def __init__(self, validated: ValidatedArtifact, tools: Mapping[str, ToolInfo]) -> None:
        self.validated = validated
        self.tools = tools
        self.visiting: set[str] = set()

    def expression(self, expression: Expression, node_id: str) -> frozenset[str] | None:
        chain = _plain_path(expression)
        if chain is None:
            return None
        artifact = self.validated.artifact
        root, rest = chain[0], chain[1:]
        if root == "input":
            return _schema_types(artifact.input_schema, rest, required=True)
        if root == "state":
            return self.state(rest[0]) if len(rest) == 1 else None
        node = artifact.nodes.get(node_id)
        if root == "resume" and isinstance(node, InterruptNode):
            return _schema_types(node.resume_schema, rest, required=True)
        if root == "result" and isinstance(node, ToolNode):
            if rest == ("text",):
                return frozenset({"string"})
            if rest == ("content",):
                return frozenset({"array"})
            info = self.tools.get(node_id)
            if rest[:1] == ("structured",) and info is not None and info.output_schema:
                return _schema_types(info.output_schema, rest[1:], required=True)
        return None

    def state(self, name: str) -> frozenset[str] | None:
        """Every type state field ``name`` can hold: its reducer's, or its initial value's
        and each assigned value's (``None`` when one of them cannot be told)."""
        spec = self.validated.artifact.state.get(name)
        if spec is None or name in self.visiting:
            return None
        if spec.reduce in _REDUCED:
            return frozenset({_REDUCED[spec.reduce]})
        self.visiting.add(name)
        try:
            kinds = {_literal_type(spec.initial)}
            for node_id, node in self.validated.artifact.nodes.items():
                if name not in getattr(node, "assign", {}):
                    continue
                template = self.validated.templates.get(place_of("nodes", node_id, "assign", name))
                if template is None:
                    return None
                if template.is_literal:
                    kinds.add(_literal_type(node.assign[name]))  # type: ignore[union-attr]
                    continue
                value = node.assign[name]  # type: ignore[union-attr]
                if isinstance(value, dict):
                    kinds.add("object")
                    continue
                if isinstance(value, list):
                    kinds.add("array")
                    continue
                traced = (
                    self.expression(template.expressions[0], node_id)
                    if len(template.expressions) == 1
                    else None
                )
                if traced is None:
                    return None
                kinds |= traced
            return frozenset(kinds)
        finally:
            self.visiting.discard(name)


@dataclass(frozen=True, slots=True)
class _Error:
    """What the checks read of a `jsonschema` validation error."""

    path: tuple[str | int, ...]
    validator: str
    validator_value: Any
    message: str
    json_path: str


def _errors(info: ToolInfo, literal: Mapping[str, Any]) -> tuple[_Error, ...] | None:
    """``literal`` validated against ``info``'s input schema, by argument, a wrong type
    first (it says more than the enum or bound it also breaks); ``None``: the schema is
    invalid. Remembered per listing entry and arguments: an edit changes one node, and
    every edit checks every node."""
    key = (info.full_fingerprint, json.dumps(literal, sort_keys=True, separators=(",", ":")))
    if key in _ERRORS:
        return _ERRORS[key]
    validator = _validator(info)
    found: tuple[_Error, ...] | None = None
    if validator is not None:
        try:
            ordered = sorted(
                validator.iter_errors(dict(literal)),
                key=lambda e: ([str(p) for p in e.absolute_path], e.validator != "type"),
            )
        except referencing.exceptions.Unresolvable:
            # a $ref the schema does not hold: nothing is fetched, the arguments are not
            # checked here (the source checks them when called)
            return None
        found = tuple(
            _Error(
                tuple(error.absolute_path),
                str(error.validator),
                error.validator_value,
                error.message,
                error.json_path,
            )
            for error in ordered
        )
    if len(key[1]) <= _MAX_REMEMBERED_CHARS:  # bounded memory: 4096 keys of 4 KiB at most
        if len(_ERRORS) >= _MAX_REMEMBERED:
            del _ERRORS[next(iter(_ERRORS))]  # the oldest
        _ERRORS[key] = found
    return found


def _validator(info: ToolInfo) -> Any:
    """A validator of ``info``'s input schema (``None``: the schema is invalid), compiled
    once per listing entry: checking a schema costs far more than using it, and every
    edit checks every node."""
    key = info.full_fingerprint
    if key in _VALIDATORS:
        return _VALIDATORS[key]
    schema = dict(info.input_schema)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
        validator = cls(schema)
    except jsonschema.exceptions.SchemaError:
        validator = None
    if len(_VALIDATORS) >= _MAX_VALIDATORS:
        del _VALIDATORS[next(iter(_VALIDATORS))]  # the oldest
    _VALIDATORS[key] = validator
    return validator


def _escape(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


def _holds_expression(value: Any) -> bool:
    if isinstance(value, str):
        return "${" in value
    if isinstance(value, dict):
        return any(_holds_expression(item) for item in value.values())
    if isinstance(value, list):
        return any(_holds_expression(item) for item in value)
    return False


def _plain_path(expression: Expression) -> tuple[str, ...] | None:
    """``("input", "city")`` for ``input.city``: an expression that only reads fields."""
    chain: list[str] = []
    pending: list[Any] = [expression.parsed.parsed]
    while pending:  # a subexpression's children, in order, nested or flat
        node = pending.pop(0)
        if not isinstance(node, dict):
            return None
        if node.get("type") == "field":
            chain.append(str(node.get("value")))
        elif node.get("type") == "subexpression":
            pending[:0] = list(node.get("children", []))
        else:
            return None
    return tuple(chain) if chain else None


def _literal_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _declared_types(schema: Any) -> frozenset[str] | None:
    """The ``type`` keyword of a schema, when it says one (``None`` otherwise)."""
    if not isinstance(schema, Mapping):
        return None
    declared = schema.get("type")
    if isinstance(declared, str):
        declared = [declared]
    if not isinstance(declared, list) or not declared:
        return None
    kinds = frozenset(item for item in declared if isinstance(item, str))
    return kinds if kinds and kinds <= _JSON_TYPES else None


def _schema_types(schema: Any, path: Sequence[str], *, required: bool) -> frozenset[str] | None:
    """The types a value read at ``path`` below ``schema`` can have (a property that is
    not required may be missing: null)."""
    current = schema
    for name in path:
        properties = current.get("properties") if isinstance(current, Mapping) else None
        if not isinstance(properties, Mapping) or name not in properties:
            return None
        needed = current.get("required")
        required = required and isinstance(needed, list) and name in needed
        current = properties[name]
    kinds = _declared_types(current)
    if kinds is None:
        return None
    return kinds if required else kinds | {"null"}


def _fits(kind: str, wanted: frozenset[str]) -> bool:
    # "number" may be integral, so it may fit "integer": not a definite mismatch
    return (
        kind in wanted
        or (kind == "integer" and "number" in wanted)
        or (kind == "number" and "integer" in wanted)
    )


def _either(kinds: Iterable[str]) -> str:
    return " or ".join(sorted(kinds))


def _undeclared(schema: Mapping[str, Any], path: Sequence[str]) -> tuple[int, list[str]] | None:
    """The index in ``path`` of the first name ``schema`` does not declare, with the
    names it declares there (``None``: every name is declared, or cannot be told)."""
    current: Any = schema
    for index, name in enumerate(path):
        if not isinstance(current, Mapping):
            return None
        properties = current.get("properties")
        if (
            not isinstance(properties, Mapping)
            or "patternProperties" in current
            or isinstance(current.get("additionalProperties"), Mapping)
        ):
            return None
        if name not in properties:
            return index, sorted(properties)
        current = properties[name]
    return None


async def check_contracts(
    validated: ValidatedArtifact,
    bindings: Mapping[str, str],
    read_probe: ProbeReader,
    *,
    draft: str,
    revision: int,
    recorded: Sequence[Mapping[str, Any]] = (),
) -> ContractCheck:
    """See the module. ``revision`` is the draft revision the next actions patch."""
    checker = _Checker(validated, draft, revision)
    artifact = validated.artifact
    probes: dict[str, tuple[str, Probe]] = {}
    for dependency, declared in sorted(artifact.dependencies.items()):
        place = place_of("dependencies", dependency)
        look = action("capability_list", query=declared.tools[0])
        source = bindings.get(dependency)
        if source is None:
            checker.add(
                place,
                "binding_missing",
                f"dependency {dependency!r} is bound to no registered source, so its tools "
                "cannot be checked",
                "find a source with capability_list and add the step with draft_add_tool "
                "{source}, or give bindings: {" + dependency + ": SOURCE} to draft_validate "
                "and draft_publish",
                [look],
            )
            continue
        try:
            probes[dependency] = (source, await read_probe(source))
        except (SourceError, ProbeMissingError) as exc:  # source_missing, probe_missing
            checker.add(place, exc.code, str(exc), "bind a registered, probed source", [look])
    used: dict[tuple[str, str], ToolInfo] = {}
    tools: dict[str, ToolInfo] = {}
    for node_id, node in sorted(artifact.nodes.items()):
        if not isinstance(node, ToolNode) or node.dependency not in probes:
            continue
        source, probe = probes[node.dependency]
        info = next((tool for tool in probe.tools if tool.name == node.tool), None)
        if info is None:
            listed = [tool.name for tool in probe.tools]
            checker.add(
                place_of("nodes", node_id, "tool"),
                "capability_missing",
                f"source {source!r} does not list tool {node.tool!r} (its probe of revision "
                f"{probe.revision})",
                choices("use a tool it lists", listed[:_MAX_SHOWN]),
                [action("capability_list", query=node.tool)],
            )
            continue
        used[(node.dependency, info.name)] = info
        tools[node_id] = info
    for node_id, info in tools.items():
        node = artifact.nodes[node_id]
        assert isinstance(node, ToolNode)
        source = probes[node.dependency][0]
        checker.arguments(node_id, node, info, source)
        checker.result_paths(node_id, node, info, source)
    tracer = _Tracer(validated, tools)
    for node_id, info in tools.items():
        node = artifact.nodes[node_id]
        assert isinstance(node, ToolNode)
        checker.argument_types(node_id, node, info, probes[node.dependency][0], tracer)
    capabilities = tuple(
        {
            "dependency": dependency,
            "source": probes[dependency][0],
            "probe_revision": probes[dependency][1].revision,
            "tool": tool,
            "contract_fingerprint": info.contract_fingerprint,
        }
        for (dependency, tool), info in sorted(used.items())
    )
    _changed(checker, capabilities, recorded)
    return ContractCheck(tuple(checker.diagnostics), capabilities)


def _changed(
    checker: _Checker,
    capabilities: Sequence[Mapping[str, Any]],
    recorded: Sequence[Mapping[str, Any]],
) -> None:
    before = {
        (item.get("dependency"), item.get("source"), item.get("tool")): item for item in recorded
    }
    for now in capabilities:
        earlier = before.get((now["dependency"], now["source"], now["tool"]))
        if earlier is None or earlier.get("contract_fingerprint") == now["contract_fingerprint"]:
            continue
        callers = sorted(
            node_id
            for node_id, node in checker.artifact.nodes.items()
            if isinstance(node, ToolNode)
            and (node.dependency, node.tool) == (now["dependency"], now["tool"])
        )
        checker.add(
            place_of("nodes", callers[0], "tool") if callers else place_of("dependencies"),
            CONTRACT_CHANGED,
            f"tool {now['tool']!r} of source {now['source']!r} changed its contract since the "
            f"draft was checked: {earlier.get('contract_fingerprint')} (probe revision "
            f"{earlier.get('probe_revision')}) -> {now['contract_fingerprint']} (probe revision "
            f"{now['probe_revision']})",
            "read the new contract; an edit (even an empty draft_patch) checks the draft "
            "against it and records it",
            [
                checker.patch(),
                action("capability_inspect", source=now["source"], tool=now["tool"]),
            ],
        )
