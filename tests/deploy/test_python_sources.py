"""Python capability sources through the Python API (`PythonSession`, the registry's
documents): functions of a real module written to a temporary directory on ``sys.path``
become tools with schemas from their type hints, the operator's annotations and a
``_meta`` naming module, qualified name and distribution; calls validate, run (sync in a
thread, async awaited) and check their results; everything that can go wrong is a typed
error naming the function. The built-in transforms give exact results.

Every test writes its own module under a unique name, so no test sees another's import."""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy import ArtifactValidationError
from flowledger.deploy.deployments.document import validate_deployment
from flowledger.deploy.registry.document import validate_source
from flowledger.deploy.sources.errors import (
    PythonSignatureError,
    SessionClosedError,
    SourceSpecError,
    SourceUnreachableError,
    ToolArgumentsError,
    ToolCallTimeoutError,
    ToolNotFoundError,
    ToolResultInvalidError,
)
from flowledger.deploy.sources.python_session import PythonSession
from flowledger.deploy.sources.python_spec import PythonSource
from flowledger.deploy.sources.python_tools import META_KEY

MODULE = '''
import asyncio
from json import dumps  # imported: not a tool
from typing_extensions import TypedDict


class Quote(TypedDict):
    total: float
    currency: str


def quote(amount: float, vat: float = 0.2, currency: str = "EUR") -> Quote:
    """A price with VAT."""
    return {"total": round(amount * (1 + vat), 2), "currency": currency}


async def slow_double(n: int, delay: float = 0.0) -> int:
    await asyncio.sleep(delay)
    return n * 2


def broken(n: int) -> int:
    raise RuntimeError(f"no luck with {n}")


def liar(n: int) -> int:
    return "not a number"  # type: ignore[return-value]


def untyped(x):
    return x


def _private(n: int) -> int:
    return n
'''


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``write(text) -> module name``: a fresh module on ``sys.path`` (forgotten after)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written: list[str] = []

    def write(text: str) -> str:
        name = f"fl_test_{uuid.uuid4().hex[:12]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


async def test_functions_are_tools_with_schemas_annotations_and_meta(modules: Any) -> None:
    name = modules(MODULE)
    source = PythonSource(name, read_only=("quote",), idempotent=("quote", "slow_double"))
    async with PythonSession(source) as session:
        assert session.server_info.to_json() == {
            "name": name,
            "version": None,
            "title": None,
            "protocol_version": "flowledger-python/1",
        }
        tools = {tool.name: tool for tool in await session.list_tools()}
        assert list(tools) == ["broken", "liar", "quote", "slow_double", "untyped"]
        quote = tools["quote"]
        assert quote.description == "A price with VAT."
        schema = quote.input_schema
        assert schema["required"] == ["amount"] and schema["additionalProperties"] is False
        assert schema["properties"]["vat"] == {"default": 0.2, "title": "Vat", "type": "number"}
        assert quote.output_schema is not None
        assert quote.output_schema["required"] == ["total", "currency"]
        assert (quote.read_only, quote.idempotent) == (True, True)
        assert (tools["slow_double"].read_only, tools["slow_double"].idempotent) == (False, True)
        assert (tools["broken"].read_only, tools["broken"].idempotent) == (False, False)
        assert quote.entry["_meta"][META_KEY] == {
            "module": name,
            "qualname": "quote",
            "distribution": None,
            "version": None,
        }
        # a return type that is not an object is wrapped, as MCP servers of the SDK do
        assert tools["slow_double"].output_schema == {
            "type": "object",
            "properties": {"result": {"type": "integer"}},
            "required": ["result"],
        }
        assert tools["untyped"].input_schema["properties"]["x"] == {"title": "X"}

        done = await session.call_tool("quote", {"amount": 10})
        assert (done.structured_content, done.is_error) == (
            {"total": 12.0, "currency": "EUR"},
            False,
        )
        assert done.text == '{"total":12.0,"currency":"EUR"}'
        doubled = await session.call_tool("slow_double", {"n": 21})
        assert doubled.structured_content == {"result": 42}
        failed = await session.call_tool("broken", {"n": 3})
        assert failed.is_error and failed.text == "RuntimeError: no luck with 3"
        assert failed.structured_content is None

        with pytest.raises(ToolArgumentsError, match=r"amount: missing; extra: extra_forbidden"):
            await session.call_tool("quote", {"extra": 1})
        with pytest.raises(ToolArgumentsError, match="n: int_parsing"):
            await session.call_tool("slow_double", {"n": "many"})
        with pytest.raises(ToolResultInvalidError, match="returned str, not its return type"):
            await session.call_tool("liar", {"n": 1})
        with pytest.raises(ToolCallTimeoutError) as late:
            await session.call_tool("slow_double", {"n": 1, "delay": 30}, timeout=0.05)
        assert late.value.code == "tool_timeout" and late.value.outcome_unknown
        with pytest.raises(ToolNotFoundError, match="_private"):
            await session.tool("_private")


async def test_a_source_of_chosen_functions_and_what_cannot_be_a_tool(modules: Any) -> None:
    name = modules(MODULE)
    chosen = PythonSource(name, functions=("quote", "gone"))
    async with PythonSession(chosen) as session:
        # a listed function the module lacks is not listed: tool_missing where it is used
        assert [tool.name for tool in await session.list_tools()] == ["quote"]
        with pytest.raises(ToolNotFoundError) as missing:
            await session.call_tool("gone", {})
        assert missing.value.code == "tool_missing"

    bad = modules(
        """
        class NotAFunction:
            pass

        def spread(*numbers: int) -> int:
            return sum(numbers)

        def positional(a: int, /) -> int:
            return a
        """
    )
    for function, why in (
        ("spread", "it takes *args (numbers); a tool takes named arguments"),
        ("positional", "it takes a positional-only parameter (a); a tool takes named arguments"),
        ("NotAFunction", "it is a type, not a function"),
    ):
        async with PythonSession(PythonSource(bad, functions=(function,))) as session:
            with pytest.raises(PythonSignatureError) as refused:
                await session.list_tools()
        assert refused.value.code == "python_signature_unsupported"
        assert str(refused.value) == (
            f"function {function!r} of python:{bad} cannot be a tool: {why}"
        )


async def test_a_module_that_does_not_import_is_unreachable(modules: Any) -> None:
    missing = f"fl_test_absent_{uuid.uuid4().hex[:8]}"
    with pytest.raises(SourceUnreachableError) as absent:
        await PythonSession(PythonSource(missing)).open()
    assert absent.value.code == "source_unreachable"
    assert str(absent.value) == (
        f"source python:{missing} is unreachable: module {missing} not found"
    )
    needs = modules("import fl_no_such_dependency_at_all\n")
    with pytest.raises(SourceUnreachableError, match="it needs fl_no_such_dependency_at_all"):
        await PythonSession(PythonSource(needs)).open()
    raising = modules("raise ValueError('configuration missing')\n")
    with pytest.raises(SourceUnreachableError, match="failed: ValueError: configuration missing"):
        await PythonSession(PythonSource(raising)).open()


def test_specs_and_documents_are_checked_with_places() -> None:
    for bad, message in (
        (lambda: PythonSource("no-dashes"), "is not a dotted module path"),
        (lambda: PythonSource("m", functions=("a", "a")), "functions lists a function twice"),
        (lambda: PythonSource("m", ("a",), read_only=("b",)), "read_only names b"),
        (lambda: PythonSource("m", builtin=True), "the standard library only"),
    ):
        with pytest.raises(SourceSpecError, match=message):
            bad()

    def issues(**fields: Any) -> list[tuple[str, str]]:
        document = {"format": "flowledger.source/v1", "name": "calc", **fields}
        with pytest.raises(ArtifactValidationError) as refused:
            validate_source(document)
        return [(issue.place, issue.code) for issue in refused.value.issues]

    assert issues(builtin={"functions": ["pick", "explode"]}) == [
        ("builtin.functions[1]", "builtin_unknown")
    ]
    assert issues(python={"module": "m", "functions": ["a"], "idempotent": ["a", "b"]}) == [
        ("python.idempotent[1]", "annotation_unknown")
    ]
    assert issues(python={"module": "m"}, builtin={}) == [("$", "bad_binding")]
    assert issues(python={"module": "os system"})[0][0] == "python.module"
    assert issues(python={"module": "m", "command": "sh"})[0] == ("python.command", "field_unknown")

    kept = validate_source({"format": "flowledger.source/v1", "name": "std", "builtin": {}})
    assert kept.identity() == {
        "transport": "builtin",
        "library": "std",
        "functions": None,
        "secrets": [],
    }
    # a deployment binds registered sources or (the operator) stdio and http: no module
    with pytest.raises(ArtifactValidationError) as inline:
        validate_deployment(
            {
                "format": "flowledger.deployment/v1",
                "name": "calc_dep",
                "artifact": {"name": "calc_flow", "version": "1"},
                "sources": {"calc": {"python": {"module": "os"}, "allow_tools": ["system"]}},
            }
        )
    assert [(i.place, i.code) for i in inline.value.issues] == [
        ("sources.calc.python", "field_unknown")
    ]


STD_CASES: list[tuple[str, dict[str, Any], Any]] = [
    ("pick", {"value": {"a": 1, "b": 2, "c": 3}, "fields": ["c", "a", "z"]}, {"c": 3, "a": 1}),
    ("rename", {"value": {"a": 1, "b": 2}, "names": {"a": "x"}}, {"x": 1, "b": 2}),
    (
        "filter_items",
        {"items": [{"n": 1}, {"n": 5}, {"n": "7"}, {}], "field": "n", "op": "gt", "value": 2},
        {"result": [{"n": 5}]},
    ),
    (
        "filter_items",
        {"items": [{"n": 1}, {"n": True}, {"n": 1.0}], "field": "n", "op": "eq", "value": 1},
        {"result": [{"n": 1}, {"n": 1.0}]},
    ),
    (
        "filter_items",
        {
            "items": [{"t": ["x", "y"]}, {"t": "xyz"}, {"t": []}],
            "field": "t",
            "op": "contains",
            "value": "y",
        },
        {"result": [{"t": ["x", "y"]}, {"t": "xyz"}]},
    ),
    (
        "filter_items",
        {"items": [{"n": 1}, {}], "field": "n", "op": "missing"},
        {"result": [{}]},
    ),
    (
        "sort_items",
        {
            "items": [{"k": 2, "i": 0}, {"i": 1}, {"k": 1, "i": 2}, {"k": 2, "i": 3}],
            "by": "k",
            "descending": True,
        },
        {"result": [{"k": 2, "i": 0}, {"k": 2, "i": 3}, {"k": 1, "i": 2}, {"i": 1}]},
    ),
    (
        "group_items",
        {"items": [{"c": "a", "i": 0}, {"i": 1}, {"c": "a", "i": 2}], "by": "c"},
        {
            "result": [
                {"key": "a", "items": [{"c": "a", "i": 0}, {"c": "a", "i": 2}]},
                {"key": None, "items": [{"i": 1}]},
            ]
        },
    ),
    (
        "template",
        {"text": "{{ who }} owes {{n}} {x}", "values": {"who": "Ada", "n": [1, 2]}},
        {"result": "Ada owes [1,2] {x}"},
    ),
    ("parse_date", {"text": "04.12.2026", "format": "%d.%m.%Y"}, {"result": "2026-12-04T00:00:00"}),
    ("parse_date", {"text": "2026-12-04T17:00Z"}, {"result": "2026-12-04T17:00:00+00:00"}),
    (
        "format_date",
        {"value": "2026-12-04T17:05:00", "format": "%d %b %Y %H:%M"},
        {"result": "04 Dec 2026 17:05"},
    ),
    (
        "validate_json",
        {
            "value": {"n": "x"},
            "schema": {
                "type": "object",
                "required": ["m"],
                "properties": {"n": {"type": "integer"}},
            },
        },
        {
            "valid": False,
            "errors": [
                {"path": "$", "message": "'m' is a required property"},
                {"path": "$.n", "message": "'x' is not of type 'integer'"},
            ],
        },
    ),
]

STD_FAILURES: list[tuple[str, dict[str, Any], str]] = [
    ("rename", {"value": {"a": 1, "b": 2}, "names": {"a": "b"}}, "two members would be named 'b'"),
    ("sort_items", {"items": [{"k": 1}, {"k": "1"}], "by": "k"}, "all numbers or all strings"),
    ("template", {"text": "{{gone}}", "values": {}}, "which values does not have"),
    ("parse_date", {"text": "yesterday"}, "is not a date in ISO 8601"),
    ("filter_items", {"items": [{"n": 1}], "field": "n", "op": "in", "value": 1}, "to be a list"),
    ("validate_json", {"value": 1, "schema": {"type": "nope"}}, "the schema is invalid"),
]


async def test_the_builtin_transforms_give_exact_results() -> None:
    async with PythonSession(PythonSource.std()) as session:
        tools = {tool.name: tool for tool in await session.list_tools()}
        assert all(tool.read_only and tool.idempotent for tool in tools.values())
        meta = tools["pick"].entry["_meta"][META_KEY]
        assert (meta["module"], meta["distribution"]) == (
            "flowledger.deploy.sources.std",
            "flowledger",
        )
        assert meta["version"] == importlib.metadata.version("flowledger")
        for tool, arguments, expected in STD_CASES:
            result = await session.call_tool(tool, arguments)
            assert (tool, result.is_error, result.structured_content) == (tool, False, expected)
        for tool, arguments, message in STD_FAILURES:
            result = await session.call_tool(tool, arguments)
            assert result.is_error and message in result.text, (tool, result.text)


async def test_a_session_opens_once_and_reports_its_server_only_while_open() -> None:
    """The life every session has (`SessionBase`): one open, closes that repeat, no
    server after the close."""
    session = PythonSession(PythonSource.std(["template"]))
    with pytest.raises(SessionClosedError):
        session.server_info  # noqa: B018 - not open yet
    async with session:
        assert session.is_open and session.server_info.name == "flowledger-std"
        with pytest.raises(RuntimeError, match="PythonSession opens only once"):
            await session.open()
    assert not session.is_open
    await session.close()  # again: nothing happens
    with pytest.raises(SessionClosedError):
        session.server_info  # noqa: B018 - closed
    with pytest.raises(RuntimeError, match="opens only once"):
        await session.open()
