"""A Python function as a tool: its listing entry (schemas from type hints, through
pydantic) and its call (arguments validated, the function run, the result checked).

The listing entry is the one an MCP server would send, so fingerprints, pins, drift
checks and call-site validation apply unchanged:

* ``inputSchema``: the parameters as a JSON object (pydantic's JSON Schema of a model
  with one field per parameter, no other property allowed); a parameter without a type
  hint accepts any JSON value; one with a default is optional;
* ``outputSchema``: the return type's JSON Schema when it is an object, else an object
  ``{"result": ...}`` wrapping it (as MCP servers built on the SDK do), so structured
  content is always an object;
* ``annotations``: the operator's ``readOnlyHint`` / ``idempotentHint``;
* ``_meta["flowledger/python"]``: module, qualified name, and the distribution the
  module belongs to and its version (``importlib.metadata``; ``null`` for a module of
  no distribution). It is in the *full* fingerprint: a new version of the package with
  the same signature is ``description_changed`` (a warning), a new signature
  ``schema_drift``.

A signature that cannot be a JSON contract (``*args``, ``**kwargs``, positional-only
parameters, a type pydantic cannot describe) is `PythonSignatureError`, naming the
function.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.metadata
import inspect
import json
import threading
import typing
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.errors import PydanticUserError

from .errors import (
    PythonSignatureError,
    ToolArgumentsError,
    ToolCallTimeoutError,
    ToolResultInvalidError,
    clip,
)
from .fingerprint import FingerprintError
from .session import ToolResult
from .tool_info import ToolInfo

__all__ = ["META_KEY", "PythonTool", "distribution_of", "python_tool"]

META_KEY: Final = "flowledger/python"
#: Threads that run synchronous functions of Python sources: their own pool, so slow or
#: overrunning functions (a thread cannot be stopped) never hold up the loop's default
#: executor, which synchronous vertex tasks of Python graphs use.
FUNCTION_THREADS: Final = 8
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_UNSUPPORTED: Final[dict[inspect._ParameterKind, str]] = {
    inspect.Parameter.VAR_POSITIONAL: "*args",
    inspect.Parameter.VAR_KEYWORD: "**kwargs",
    inspect.Parameter.POSITIONAL_ONLY: "a positional-only parameter",
}


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(FUNCTION_THREADS, thread_name_prefix="flowledger-python")
        return _pool


@functools.cache
def _distributions() -> Mapping[str, list[str]]:
    return importlib.metadata.packages_distributions()


def distribution_of(module: str) -> tuple[str | None, str | None]:
    """The distribution that installs the top-level package of ``module`` (or, when no
    installed distribution lists it, the distribution of that package's name) and its
    version; ``(None, None)`` for a module of no distribution (on ``PYTHONPATH`` only)."""
    top = module.partition(".")[0]
    # an editable install records no top-level names: then the distribution of the
    # package's own name, if one is installed
    names = _distributions().get(top) or [top]
    for name in sorted(names):
        try:
            return name, importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None, None


@dataclass(frozen=True, eq=False)
class PythonTool:
    """One function: its `ToolInfo` and how to call it."""

    info: ToolInfo
    function: Callable[..., Any]
    arguments: type[BaseModel]
    result: TypeAdapter[Any]
    wrapped: bool

    async def call(
        self,
        label: str,
        arguments: Mapping[str, Any],
        timeout: float,  # noqa: ASYNC109 - part of the contract, as SourceSession.call_tool
    ) -> ToolResult:
        """Validate ``arguments``, run the function (a sync one in a thread of this
        module's pool of `FUNCTION_THREADS`), and
        return its result as structured content. An exception the function raises is a
        result with ``is_error`` (like an MCP tool's own error); arguments that do not
        validate are `ToolArgumentsError` with nothing run, a result that does not match
        the return type `ToolResultInvalidError`, and no answer within ``timeout``
        `ToolCallTimeoutError` (a sync function's thread cannot be stopped: it finishes
        in the background, its result dropped)."""
        name = self.info.name
        try:
            model = self.arguments.model_validate(dict(arguments))
        except ValidationError as exc:
            raise ToolArgumentsError(
                label, name, f"the arguments do not match its signature ({_places(exc)})"
            ) from None
        kwargs = {
            field.alias or key: getattr(model, key)
            for key, field in type(model).model_fields.items()
        }
        try:
            if inspect.iscoroutinefunction(self.function):
                value = await asyncio.wait_for(self.function(**kwargs), timeout)
            else:
                running = asyncio.get_running_loop().run_in_executor(
                    _executor(), functools.partial(self.function, **kwargs)
                )
                value = await asyncio.wait_for(running, timeout)
        except TimeoutError:
            raise ToolCallTimeoutError(label, name, timeout) from None
        except Exception as exc:  # the function's own failure: the tool's error result
            text = f"{type(exc).__name__}: {clip(str(exc))}" if str(exc) else type(exc).__name__
            return ToolResult(({"type": "text", "text": text},), None, is_error=True)
        try:
            data = self.result.dump_python(
                self.result.validate_python(value), mode="json", warnings="error"
            )
        except Exception as exc:  # ValidationError, or a value pydantic cannot serialise
            raise ToolResultInvalidError(
                label, name, f"it returned {type(value).__name__}, not its return type: {exc}"
            ) from None
        structured = {"result": data} if self.wrapped else data
        text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
        return ToolResult(({"type": "text", "text": text},), structured, is_error=False)


def _places(exc: ValidationError) -> str:
    """Where the arguments are wrong (never the values), at most five places."""
    found = [
        f"{'.'.join(str(part) for part in error['loc']) or '(root)'}: {error['type']}"
        for error in exc.errors(include_input=False, include_url=False)
    ]
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    return "; ".join(found[:5]) + more


def _signature(label: str, function: Callable[..., Any]) -> tuple[type[BaseModel], Any]:
    name = function.__name__
    try:
        signature = inspect.signature(function)
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception as exc:  # NameError for an unresolvable hint, ValueError, TypeError
        raise PythonSignatureError(label, name, f"its type hints cannot be read: {exc}") from None
    fields: dict[str, Any] = {}
    for index, parameter in enumerate(signature.parameters.values()):
        what = _UNSUPPORTED.get(parameter.kind)
        if what is not None:
            raise PythonSignatureError(
                label, name, f"it takes {what} ({parameter.name}); a tool takes named arguments"
            )
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        hint = hints.get(parameter.name, Any)
        # an internal field name: parameters may be called like BaseModel's attributes
        fields[f"p{index}"] = (hint, Field(default, alias=parameter.name))
    try:
        model = create_model(
            f"{name}_arguments",
            __config__=ConfigDict(extra="forbid", populate_by_name=False),
            **fields,
        )
    except (PydanticUserError, TypeError, ValueError) as exc:
        raise PythonSignatureError(label, name, f"its parameters have no schema: {exc}") from None
    return model, hints.get("return", Any)


def python_tool(
    label: str,
    module: str,
    function: Callable[..., Any],
    annotations: Mapping[str, Any],
) -> PythonTool:
    """``function`` of ``module`` as a tool (`PythonSignatureError` if it cannot be)."""
    name = function.__name__
    arguments, returns = _signature(label, function)
    try:
        input_schema = arguments.model_json_schema(by_alias=True)
        result = TypeAdapter(returns)
        output = result.json_schema(mode="serialization")
    except Exception as exc:  # PydanticSchemaGenerationError, PydanticInvalidForJsonSchema
        raise PythonSignatureError(label, name, f"its types have no JSON Schema: {exc}") from None
    wrapped = output.get("type") != "object"
    if wrapped:
        defs = output.pop("$defs", None)
        output = {"type": "object", "properties": {"result": output}, "required": ["result"]}
        if defs is not None:
            output["$defs"] = defs
    distribution, version = distribution_of(module)
    entry: dict[str, Any] = {
        "name": name,
        "inputSchema": input_schema,
        "outputSchema": output,
        "annotations": dict(annotations),
        "_meta": {
            META_KEY: {
                "module": module,
                "qualname": function.__qualname__,
                "distribution": distribution,
                "version": version,
            }
        },
    }
    description = inspect.getdoc(function)
    if description:
        entry["description"] = description
    try:
        info = ToolInfo.from_entry(entry)
    except FingerprintError as exc:
        raise PythonSignatureError(
            label, name, f"its schemas cannot be fingerprinted: {exc}"
        ) from None
    return PythonTool(info, function, arguments, result, wrapped)
