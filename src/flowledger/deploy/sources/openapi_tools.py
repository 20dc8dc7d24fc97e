"""The operations of an OpenAPI document as tools: their listing entries and their calls.

Each operation with an ``operationId`` is a tool of that name (``operations`` of the
source may choose some). Its listing entry is the one an MCP server would send, so
fingerprints, pins, drift checks and call-site validation apply unchanged:

* ``inputSchema``: one flat object, a property per path, query and header parameter (by
  its name) and ``body`` for a JSON request body; required ones are required; nothing
  else is allowed;
* ``outputSchema``: the JSON schema of the 2xx responses (``anyOf`` when they differ),
  wrapped as ``{"result": ...}`` when it is not an object (as MCP servers built on the
  SDK do); absent when no 2xx response has JSON content;
* ``annotations``: ``GET`` / ``HEAD`` / ``OPTIONS`` are read-only and idempotent (HTTP's
  safe methods), every other method neither;
* ``_meta["flowledger/openapi"]``: the method and path template (in the *full*
  fingerprint: an operation moved to another path is ``description_changed``).

What cannot be a tool (a cookie parameter that is required, a parameter described by
``content``, two parameters of one name, a request body without a JSON media type, a
reference outside the document) is `OpenApiOperationError`, naming the operation; an
operation without an id cannot be named, so it is not listed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

import jsonschema  # type: ignore[import-untyped, unused-ignore]
import jsonschema.validators  # type: ignore[import-untyped, unused-ignore]

from .errors import OpenApiOperationError, ToolArgumentsError, ToolResultInvalidError, clip
from .fingerprint import FingerprintError
from .openapi_schema import SchemaConverter, UnsupportedSchema, resolve
from .session import ToolResult
from .tool_info import ToolInfo

__all__ = ["META_KEY", "METHODS", "OpenApiOperation", "Parameter", "operation_tools"]

META_KEY: Final = "flowledger/openapi"
METHODS: Final = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
BODY: Final = "body"
_JSON_MEDIA: Final = re.compile(r"^application/(?:[\w.+-]+\+)?json$", re.IGNORECASE)
_STYLES: Final = {
    "path": {"simple"},
    "header": {"simple"},
    "query": {"form", "spaceDelimited", "pipeDelimited", "deepObject"},
}


@dataclass(frozen=True)
class Parameter:
    """How one argument is sent: ``where`` (path, query, header), its style and explode."""

    name: str
    where: str
    style: str
    explode: bool


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def _path_value(value: Any, explode: bool) -> str:
    """Simple style, every reserved character percent-encoded (a value is one segment:
    ``/`` and a whole ``.`` or ``..`` never reach another path)."""
    if isinstance(value, list):
        text = ",".join(quote(_scalar(v), safe="") for v in value)
    elif isinstance(value, dict):
        pairs = [(quote(str(k), safe=""), quote(_scalar(v), safe="")) for k, v in value.items()]
        text = ",".join(f"{k}={v}" if explode else f"{k},{v}" for k, v in pairs)
    else:
        text = quote(_scalar(value), safe="")
    return "%2E" * len(text) if text in (".", "..") else text


@dataclass(frozen=True, eq=False)
class OpenApiOperation:
    """One operation: its `ToolInfo` and how to call it."""

    info: ToolInfo
    method: str
    path: str
    parameters: tuple[Parameter, ...]
    body: bool
    wrapped: bool
    documented: frozenset[str]  # the 2xx statuses (or "2XX") whose JSON is the output

    def arguments_validator(self) -> Any:
        schema = dict(self.info.input_schema)
        return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(
            schema
        )

    def output_validator(self) -> Any:
        schema = self.info.output_schema
        if schema is None:
            return None
        data = dict(schema)
        return jsonschema.validators.validator_for(data, default=jsonschema.Draft202012Validator)(
            data
        )

    def request(
        self, label: str, arguments: Mapping[str, Any], validator: Any
    ) -> tuple[str, list[tuple[str, str]], dict[str, str], Any]:
        """Path, query pairs, headers and JSON body of a call (`ToolArgumentsError`,
        naming places but never values, when ``arguments`` do not validate)."""
        name = self.info.name
        errors = sorted(validator.iter_errors(dict(arguments)), key=lambda e: list(e.path))
        if errors:
            places = "; ".join(f"{e.json_path}: {e.validator}" for e in errors[:5])
            raise ToolArgumentsError(label, name, f"the arguments do not validate ({places})")
        path = self.path
        query: list[tuple[str, str]] = []
        headers: dict[str, str] = {}
        for parameter in self.parameters:
            if parameter.name not in arguments:
                continue
            value = arguments[parameter.name]
            if parameter.where == "path":
                path = path.replace(
                    "{" + parameter.name + "}", _path_value(value, parameter.explode)
                )
            elif parameter.where == "header":
                text = _path_value(value, parameter.explode)
                headers[parameter.name] = text
            else:
                query += _query(parameter, value)
        body = arguments.get(BODY) if self.body else None
        return path, query, headers, body

    def result(self, label: str, status: int, data: bytes, validator: Any) -> ToolResult:
        """A 2xx response as the tool's result: its JSON checked against the output
        schema (`ToolResultInvalidError`) when the document says it is JSON."""
        name = self.info.name
        if str(status) not in self.documented and f"{status // 100}XX" not in self.documented:
            text = data.decode("utf-8", "replace")
            return ToolResult(({"type": "text", "text": text},) if text else (), None, False)
        try:
            value = json.loads(data)
        except ValueError:
            raise ToolResultInvalidError(
                label, name, f"HTTP {status}: the response body is not JSON"
            ) from None
        structured = {"result": value} if self.wrapped else value
        if validator is not None:
            found = sorted(validator.iter_errors(structured), key=lambda e: list(e.path))
            if found:
                places = "; ".join(f"{e.json_path}: {e.validator}" for e in found[:5])
                raise ToolResultInvalidError(
                    label, name, f"HTTP {status}: the body does not match its schema ({places})"
                )
        text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
        return ToolResult(({"type": "text", "text": text},), structured, False)


def _query(parameter: Parameter, value: Any) -> list[tuple[str, str]]:
    name = parameter.name
    if isinstance(value, list):
        if parameter.style == "form" and parameter.explode:
            return [(name, _scalar(v)) for v in value]
        joiner = {"form": ",", "spaceDelimited": " ", "pipeDelimited": "|"}.get(
            parameter.style, ","
        )
        return [(name, joiner.join(_scalar(v) for v in value))]
    if isinstance(value, dict):
        if parameter.style == "deepObject":
            return [(f"{name}[{k}]", _scalar(v)) for k, v in value.items()]
        if parameter.explode:
            return [(str(k), _scalar(v)) for k, v in value.items()]
        return [(name, ",".join(f"{k},{_scalar(v)}" for k, v in value.items()))]
    return [(name, _scalar(value))]


def _parameters(
    document: Mapping[str, Any], item: Mapping[str, Any], operation: Mapping[str, Any]
) -> list[dict[str, Any]]:
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for raw in [*(item.get("parameters") or []), *(operation.get("parameters") or [])]:
        found = resolve(document, raw)
        merged[(str(found.get("name")), str(found.get("in")))] = dict(found)
    return list(merged.values())


def _json_content(content: Any) -> Any:
    """The schema of the JSON media type of ``content`` (``None``: no JSON media type)."""
    if not isinstance(content, Mapping):
        return None
    for media, entry in content.items():
        if _JSON_MEDIA.match(media.split(";")[0].strip()):
            return (entry or {}).get("schema", {})
    return None


def _operation(
    label: str,
    document: Mapping[str, Any],
    converter: SchemaConverter,
    path: str,
    method: str,
    item: Mapping[str, Any],
    operation: Mapping[str, Any],
) -> OpenApiOperation:
    name = str(operation["operationId"])

    def unsupported(why: str) -> OpenApiOperationError:
        return OpenApiOperationError(label, name, why)

    properties: dict[str, Any] = {}
    required: list[str] = []
    parameters: list[Parameter] = []
    defs: dict[str, Any] = {}
    for found in _parameters(document, item, operation):
        where, pname = found.get("in"), str(found.get("name"))
        if where == "cookie":
            if found.get("required"):
                raise unsupported(f"it needs cookie parameter {pname!r}")
            continue
        if "content" in found or "schema" not in found:
            raise unsupported(f"parameter {pname!r} is described by content, not a schema")
        style = str(found.get("style") or ("form" if where == "query" else "simple"))
        if style not in _STYLES.get(str(where), set()):
            raise unsupported(f"parameter {pname!r} has style {style}, which is not supported")
        if pname in properties or (pname == BODY and operation.get("requestBody")):
            raise unsupported(f"two parameters (or a parameter and the body) are named {pname!r}")
        schema = converter.standalone(found["schema"])
        defs.update(schema.pop("$defs", {}))
        if found.get("description") and "description" not in schema:
            schema["description"] = found["description"]
        properties[pname] = schema
        if found.get("required") or where == "path":
            required.append(pname)
        explode = bool(found.get("explode", style == "form"))
        parameters.append(Parameter(pname, str(where), style, explode))
    body = False
    raw_body = operation.get("requestBody")
    if raw_body is not None:
        request = resolve(document, raw_body)
        schema = _json_content(request.get("content"))
        if schema is None:
            if request.get("required"):
                raise unsupported("its request body has no JSON media type")
        else:
            converted = converter.standalone(schema)
            defs.update(converted.pop("$defs", {}))
            properties[BODY] = converted
            body = True
            if request.get("required"):
                required.append(BODY)
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        input_schema["required"] = required
    if defs:
        input_schema["$defs"] = defs
    outputs: list[dict[str, Any]] = []
    documented: set[str] = set()
    for status, raw in sorted((operation.get("responses") or {}).items()):
        code = str(status).upper()
        if not re.fullmatch(r"2(\d\d|XX)", code):
            continue
        schema = _json_content(resolve(document, raw).get("content"))
        if schema is None:
            continue
        documented.add(code)
        converted = converter.standalone(schema)
        if converted not in outputs:
            outputs.append(converted)
    output: dict[str, Any] | None = None
    wrapped = False
    if outputs:
        if len(outputs) == 1:
            output = outputs[0]
        else:
            out_defs: dict[str, Any] = {}
            for one in outputs:
                out_defs.update(one.pop("$defs", {}))
            output = {"anyOf": outputs, **({"$defs": out_defs} if out_defs else {})}
        kind = output.get("type")
        wrapped = kind != "object"
        if wrapped:
            out_defs = output.pop("$defs", None)
            output = {"type": "object", "properties": {"result": output}, "required": ["result"]}
            if out_defs:
                output["$defs"] = out_defs
    upper = method.upper()
    safe = upper in SAFE_METHODS
    entry: dict[str, Any] = {
        "name": name,
        "inputSchema": input_schema,
        "annotations": {"readOnlyHint": safe, "idempotentHint": safe},
        "_meta": {META_KEY: {"method": upper, "path": path}},
    }
    if output is not None:
        entry["outputSchema"] = output
    summary, description = operation.get("summary"), operation.get("description")
    if isinstance(summary, str) and summary:
        entry["title"] = clip(summary, 200)
    if (isinstance(description, str) and description) or (isinstance(summary, str) and summary):
        entry["description"] = description or summary
    try:
        info = ToolInfo.from_entry(entry)
    except FingerprintError as exc:
        raise unsupported(f"its schemas cannot be fingerprinted: {exc}") from None
    operation_tool = OpenApiOperation(
        info, upper, path, tuple(parameters), body, wrapped, frozenset(documented)
    )
    for check in (operation_tool.arguments_validator, operation_tool.output_validator):
        try:
            check()
        except jsonschema.exceptions.SchemaError as exc:
            raise unsupported(f"a schema is not valid JSON Schema: {clip(exc.message)}") from None
    return operation_tool


def operation_tools(
    label: str, document: Mapping[str, Any], selected: tuple[str, ...] | None
) -> dict[str, OpenApiOperation]:
    """The tools of a validated ``document`` (those of ``selected``, when given, that it
    has: a missing one is ``tool_missing`` where it is used), in name order."""
    converter = SchemaConverter(document)
    found: dict[str, OpenApiOperation] = {}
    for path, item in (document.get("paths") or {}).items():
        item = resolve(document, item) if isinstance(item, Mapping) else {}
        for method in METHODS:
            operation = item.get(method)
            if not isinstance(operation, Mapping) or "operationId" not in operation:
                continue
            name = str(operation["operationId"])
            if selected is not None and name not in selected:
                continue
            try:
                found[name] = _operation(label, document, converter, path, method, item, operation)
            except UnsupportedSchema as exc:
                raise OpenApiOperationError(label, name, str(exc)) from None
    return dict(sorted(found.items()))
