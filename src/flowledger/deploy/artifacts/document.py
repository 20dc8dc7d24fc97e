"""Reading an authored artifact document (YAML or JSON) into plain JSON data.

Both readers refuse duplicate keys, naming the place; both bound size and nesting
before building anything, so a hostile document costs linear time.

YAML is read from PyYAML's event stream (no object construction at all, so nothing
beyond safe loading is ever possible) and resolved with the YAML 1.2 core schema: only
``true``/``false`` are booleans (``yes``, ``no``, ``on`` and ``off`` stay strings),
dates stay strings, and ``.inf``/``.nan`` are refused because JSON has no such numbers.
Anchors, aliases, merge keys and tags other than the core ones (``!!str``, ``!!int``,
``!!float``, ``!!bool``, ``!!null``, ``!!map``, ``!!seq``) are refused: an artifact is
JSON data written in YAML syntax. Keys must be strings. Exactly one document.

`check_json_data` checks data given from Python (or read above) for what canonical JSON
needs: string keys, finite numbers, integers within ±(2**53 - 1), valid Unicode, bounded
depth.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import yaml

from .errors import MAX_ISSUES, ROOT_PLACE, ArtifactIssue, ArtifactValidationError, place_of
from .limits import MAX_DOCUMENT_DEPTH, MAX_SOURCE_BYTES

__all__ = ["SourceFormat", "check_json_data", "read_document"]

SourceFormat = Literal["yaml", "json"]

_SAFE_INT: Final = (1 << 53) - 1
# libyaml's parser when PyYAML was built with it (about ten times faster), else PyYAML's
# own; both only parse here, the events are turned into data below.
_LOADER: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CORE: Final = "tag:yaml.org,2002:"
_NULL: Final = re.compile(r"null|Null|NULL|~|")
_TRUE: Final = frozenset({"true", "True", "TRUE"})
_FALSE: Final = frozenset({"false", "False", "FALSE"})
_INT: Final = re.compile(r"[-+]?[0-9]+")
_INT_OCT: Final = re.compile(r"0o[0-7]+")
_INT_HEX: Final = re.compile(r"0x[0-9a-fA-F]+")
_FLOAT: Final = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_NOT_FINITE: Final = re.compile(r"[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")
_JSON_STRINGS: Final = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_JSON_BRACKETS: Final = re.compile(rb"[\[\]{}]")


def _issue(place: str, code: str, message: str, hint: str = "") -> ArtifactIssue:
    return ArtifactIssue(place, code, message, hint)


def _text(source: str | bytes) -> str:
    if isinstance(source, str):
        # Each character is at least one UTF-8 byte: the length alone can rule text out.
        if len(source) > MAX_SOURCE_BYTES or len(source.encode("utf-8", "replace")) > (
            MAX_SOURCE_BYTES
        ):
            raise ArtifactValidationError(
                [_issue(ROOT_PLACE, "too_large", f"the document is over {MAX_SOURCE_BYTES} bytes")]
            )
        return source.removeprefix("\ufeff")
    if not isinstance(source, bytes | bytearray | memoryview):
        raise TypeError(f"an artifact document is str or bytes, not {type(source).__name__}")
    data = bytes(source)
    if len(data) > MAX_SOURCE_BYTES:
        raise ArtifactValidationError(
            [_issue(ROOT_PLACE, "too_large", f"the document is over {MAX_SOURCE_BYTES} bytes")]
        )
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise ArtifactValidationError(
            [_issue(ROOT_PLACE, "not_utf8", f"the document is not UTF-8 (byte {exc.start})")]
        ) from None


def read_document(source: str | bytes, format: SourceFormat | None = None) -> Any:
    """Parse one authored document into JSON data, or raise `ArtifactValidationError`
    with every problem found (places, and line and column for YAML).

    ``format`` ``None`` picks JSON when the first non-blank character is ``{``, else
    YAML."""
    text = _text(source)
    if format is None:
        format = "json" if text.lstrip().startswith("{") else "yaml"
    if format == "json":
        return _read_json(text)
    if format == "yaml":
        return _read_yaml(text)
    raise ValueError(f"format must be 'yaml' or 'json', not {format!r}")


# -- JSON --------------------------------------------------------------------------------


class _Pairs(list[tuple[str, Any]]):
    """An object as parsed, duplicates kept, so they can be reported with their place."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _read_json(text: str) -> Any:
    data = text.encode("utf-8", "surrogatepass")
    depth = 0
    for match in _JSON_BRACKETS.finditer(_JSON_STRINGS.sub(b"", data)):
        depth += 1 if match.group() in (b"[", b"{") else -1
        if depth > MAX_DOCUMENT_DEPTH:
            raise ArtifactValidationError(
                [_issue(ROOT_PLACE, "too_deep", f"nesting is deeper than {MAX_DOCUMENT_DEPTH}")]
            )
    try:
        raw = json.loads(text, object_pairs_hook=_Pairs, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ArtifactValidationError(
            [
                _issue(
                    ROOT_PLACE,
                    "syntax",
                    f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                )
            ]
        ) from None
    except (ValueError, RecursionError) as exc:
        raise ArtifactValidationError([_issue(ROOT_PLACE, "syntax", f"invalid JSON: {exc}")]) from (
            None
        )
    issues: list[ArtifactIssue] = []
    value = _objects(raw, (), issues)
    if issues:
        raise ArtifactValidationError(issues)
    return value


def _objects(raw: Any, path: tuple[str | int, ...], issues: list[ArtifactIssue]) -> Any:
    """Turn `_Pairs` into dicts (depth is bounded by the scan, so recursion is safe)."""
    if isinstance(raw, _Pairs):
        result: dict[str, Any] = {}
        for key, item in raw:
            if key in result:
                issues.append(
                    _issue(
                        place_of(*path),
                        "duplicate_key",
                        f"duplicate key {key!r}",
                        "a key may appear once in an object",
                    )
                )
                continue
            result[key] = _objects(item, (*path, key), issues)
        return result
    if isinstance(raw, list):
        return [_objects(item, (*path, index), issues) for index, item in enumerate(raw)]
    return raw


# -- YAML --------------------------------------------------------------------------------


@dataclass
class _Frame:
    container: dict[str, Any] | list[Any]
    path: tuple[str | int, ...]
    key: str | None = None  # a mapping's pending key
    key_given: bool = False
    skip_value: bool = False  # the pending key was refused: drop its value
    seen: set[str] = field(default_factory=set)


def _mark(event: Any) -> str:
    mark = event.start_mark
    return f"line {mark.line + 1}, column {mark.column + 1}"


def _plain_style(event: Any) -> bool:
    """Whether a scalar was written plain (unquoted, not a block): PyYAML says ``None``,
    libyaml ``""``."""
    return not event.style


def _scalar(event: Any, place: str, issues: list[ArtifactIssue]) -> Any:
    tag = event.tag
    value: str = event.value
    if tag in (None, "!"):
        if tag == "!" or not _plain_style(event):  # quoted, block or non-specific: text
            return value
        return _plain(value, place, event, issues)
    if not isinstance(tag, str) or not tag.startswith(_CORE):
        issues.append(
            _issue(place, "yaml_tag", f"tag {tag!r} is not supported ({_mark(event)})", "remove it")
        )
        return None
    kind = tag.removeprefix(_CORE)
    if kind == "str":
        return value
    resolved = _plain(value, place, event, issues)
    expected = {"null": type(None), "bool": bool, "int": int, "float": float}.get(kind)
    if expected is float and isinstance(resolved, int) and not isinstance(resolved, bool):
        return float(resolved)
    if expected is None or type(resolved) is not expected:
        issues.append(
            _issue(place, "yaml_tag", f"{value!r} is not a valid !!{kind} ({_mark(event)})")
        )
        return None
    return resolved


def _plain(value: str, place: str, event: Any, issues: list[ArtifactIssue]) -> Any:
    if _NULL.fullmatch(value):
        return None
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    if _INT.fullmatch(value):
        return int(value)
    if _INT_OCT.fullmatch(value):
        return int(value[2:], 8)
    if _INT_HEX.fullmatch(value):
        return int(value[2:], 16)
    if _FLOAT.fullmatch(value):
        return float(value)
    if _NOT_FINITE.fullmatch(value):
        issues.append(
            _issue(
                place,
                "not_finite",
                f"{value} is not a JSON number ({_mark(event)})",
                "quote it if you mean text",
            )
        )
        return None
    return value


def _read_yaml(text: str) -> Any:
    issues: list[ArtifactIssue] = []
    stack: list[_Frame] = []
    root: list[Any] = []
    documents = 0
    try:
        for event in yaml.parse(text, Loader=_LOADER):
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    issues.append(
                        _issue(
                            ROOT_PLACE,
                            "many_documents",
                            f"a second YAML document starts at {_mark(event)}",
                            "an artifact is one document",
                        )
                    )
                    break
                continue
            if not isinstance(
                event,
                yaml.ScalarEvent
                | yaml.MappingStartEvent
                | yaml.SequenceStartEvent
                | yaml.MappingEndEvent
                | yaml.SequenceEndEvent
                | yaml.AliasEvent,
            ):
                continue
            if isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                done = stack.pop()
                _deliver(done.container, stack, root, issues, event)
                continue
            path = _value_path(stack)
            place = place_of(*path)
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                issues.append(
                    _issue(
                        place,
                        "yaml_alias",
                        f"anchors and aliases are not supported ({_mark(event)})",
                        "write the value out in full",
                    )
                )
                raise _Stop
            is_key = (
                bool(stack) and isinstance(stack[-1].container, dict) and not stack[-1].key_given
            )
            if isinstance(event, yaml.ScalarEvent):
                if is_key:
                    _take_key(stack[-1], event, issues)
                    continue
                _deliver(_scalar(event, place, issues), stack, root, issues, event)
                continue
            if is_key:
                issues.append(
                    _issue(
                        place,
                        "key_not_string",
                        f"a key must be a string, not a collection ({_mark(event)})",
                    )
                )
                raise _Stop
            tag = getattr(event, "tag", None)
            wanted = "map" if isinstance(event, yaml.MappingStartEvent) else "seq"
            if tag not in (None, "!", _CORE + wanted):
                issues.append(
                    _issue(
                        place,
                        "yaml_tag",
                        f"tag {tag!r} is not supported ({_mark(event)})",
                        "remove it",
                    )
                )
            if len(stack) >= MAX_DOCUMENT_DEPTH:
                issues.append(
                    _issue(place, "too_deep", f"nesting is deeper than {MAX_DOCUMENT_DEPTH}")
                )
                raise _Stop
            container: dict[str, Any] | list[Any] = (
                {} if isinstance(event, yaml.MappingStartEvent) else []
            )
            stack.append(_Frame(container, path))
    except _Stop:
        pass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "malformed YAML"
        issues.append(_issue(ROOT_PLACE, "syntax", f"invalid YAML{where}: {problem}"))
    except yaml.YAMLError as exc:
        issues.append(_issue(ROOT_PLACE, "syntax", f"invalid YAML: {exc}"))
    if issues:
        raise ArtifactValidationError(issues)
    if not root:
        raise ArtifactValidationError([_issue(ROOT_PLACE, "empty", "the document is empty")])
    return root[0]


class _Stop(Exception):
    """Reading cannot go on meaningfully; the issues so far are the answer."""


def _value_path(stack: list[_Frame]) -> tuple[str | int, ...]:
    if not stack:
        return ()
    top = stack[-1]
    if isinstance(top.container, list):
        return (*top.path, len(top.container))
    if top.key_given and top.key is not None:
        return (*top.path, top.key)
    return top.path


def _take_key(frame: _Frame, event: Any, issues: list[ArtifactIssue]) -> None:
    place = place_of(*frame.path)
    key: Any = event.value
    if event.tag in (None, "!") and _plain_style(event):
        key = _plain(event.value, place, event, [])
    elif event.tag not in (None, "!", _CORE + "str"):
        key = None
    frame.key_given = True
    frame.skip_value = True
    frame.key = None
    if event.value == "<<" and _plain_style(event):
        issues.append(_issue(place, "yaml_alias", f"merge keys are not supported ({_mark(event)})"))
    elif not isinstance(key, str):
        issues.append(
            _issue(
                place,
                "key_not_string",
                f"key {event.value!r} is not a string ({_mark(event)})",
                "quote it",
            )
        )
    elif key in frame.seen:
        issues.append(
            _issue(
                place,
                "duplicate_key",
                f"duplicate key {key!r} ({_mark(event)})",
                "a key may appear once in a mapping",
            )
        )
    else:
        frame.seen.add(key)
        frame.key = key
        frame.skip_value = False


def _deliver(
    value: Any, stack: list[_Frame], root: list[Any], issues: list[ArtifactIssue], event: Any
) -> None:
    if not stack:
        root.append(value)
        return
    top = stack[-1]
    if isinstance(top.container, list):
        top.container.append(value)
        return
    if not top.skip_value and top.key is not None:
        top.container[top.key] = value
    top.key_given = False
    top.key = None
    top.skip_value = False


# -- checking data from anywhere ---------------------------------------------------------


def check_json_data(value: Any) -> list[ArtifactIssue]:
    """Every reason ``value`` is not canonical-JSON data, each with its place: keys that
    are not strings, numbers that are not finite or are integers beyond ±(2**53 - 1),
    strings with lone surrogates, values of other types, nesting deeper than
    `MAX_DOCUMENT_DEPTH`."""
    issues: list[ArtifactIssue] = []
    pending: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while pending and len(issues) <= MAX_ISSUES:
        item, path = pending.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, str):
            if not _unicode(item):
                issues.append(_issue(place_of(*path), "not_unicode", "a lone surrogate"))
            continue
        if isinstance(item, int):
            if not -_SAFE_INT <= item <= _SAFE_INT:
                issues.append(
                    _issue(
                        place_of(*path),
                        "number_range",
                        "an integer beyond ±(2**53 - 1) has no exact JSON form",
                        "write it as a string",
                    )
                )
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                issues.append(_issue(place_of(*path), "not_finite", f"{item} is not a JSON number"))
            continue
        if isinstance(item, dict | list):
            if len(path) >= MAX_DOCUMENT_DEPTH:
                issues.append(
                    _issue(
                        place_of(*path), "too_deep", f"nesting is deeper than {MAX_DOCUMENT_DEPTH}"
                    )
                )
                continue
            if isinstance(item, dict):
                children: list[tuple[Any, tuple[str | int, ...]]] = []
                for key, child in item.items():
                    if not isinstance(key, str) or not _unicode(key):
                        issues.append(
                            _issue(
                                place_of(*path), "key_not_string", f"key {key!r} is not a string"
                            )
                        )
                        continue
                    children.append((child, (*path, key)))
                pending.extend(reversed(children))
            else:
                pending.extend(reversed([(child, (*path, i)) for i, child in enumerate(item)]))
            continue
        issues.append(
            _issue(place_of(*path), "not_json", f"a {type(item).__name__} is not a JSON value")
        )
    return issues


def _unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
