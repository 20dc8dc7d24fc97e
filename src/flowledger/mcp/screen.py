"""Screening JSON-RPC messages before the SDK sees them, so every one gets an answer.

The SDK's stdio transport parses each line itself and, when that fails, hands the
exception to the server, which logs it and answers nothing: a client that sent a lone
surrogate escape, a number of thousands of digits, or deep nesting would wait forever.
And like Python's `json`, it lets the last of two equal keys win. `refusal` finds both
kinds of message first and builds the JSON-RPC error that answers them:

* text that is not one JSON value the SDK can read (invalid UTF-8, malformed JSON,
  a repeated object key, anything its parser refuses) is ``-32700`` (parse error);
  a repeated key is named by its JSON pointer (``/params/arguments/limit``);
* JSON that is not a JSON-RPC 2.0 message is ``-32600`` (invalid request);
* so is a request (a message with a ``method``) whose ``id`` is present but is not a
  string or an integer (an object, an array, a number with a fraction or an exponent, a
  boolean, ``null``): the SDK would take it for a notification and answer nothing
  (over HTTP, a bare 202). JSON-RPC 2.0 answers it ``-32600`` with ``id: null``.

The error carries the message's ``id`` where it can be recovered (a top-level string or
integer ``id``, read leniently if need be, and not itself repeated), else ``null``.
`ScreenedLines` applies this to the lines of the stdio transport. Over HTTP the SDK
answers unreadable bodies itself; `body_refusal` is the part it lacks (repeated keys
and bad ids).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

import mcp_types as types
import pydantic

from ..jsontext import DuplicateKeyError, decode_json

__all__ = ["ScreenedLines", "body_refusal", "refusal"]

#: Longest reason quoted in an error message.
_MAX_REASON: Final = 300
#: Integers longer than this are not read as ids (Python refuses over 4300 digits).
_MAX_ID_DIGITS: Final = 64
# An id written first, or right after "jsonrpc" (as SDK clients write it), is a top-level
# member whatever follows: read it from text that cannot be parsed at all.
_LEADING_ID: Final = re.compile(
    r'\s*\{\s*(?:"jsonrpc"\s*:\s*"[^"\\]*"\s*,\s*)?"id"\s*:\s*'
    r'(?:(-?(?:0|[1-9][0-9]{0,63}))(?![0-9.eE])|"((?:[^"\\]|\\.){0,256})")\s*[,}]'
)

RequestId = int | str | None


def _bounded(reason: str) -> str:
    return reason if len(reason) <= _MAX_REASON else reason[:_MAX_REASON] + "..."


def _error(code: int, message: str, request_id: RequestId) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=types.ErrorData(code=code, message=_bounded(message)),
    )


def _id_of(value: Any) -> RequestId:
    """The id of a decoded message, if it is one JSON-RPC allows (string or integer)."""
    if not isinstance(value, dict):
        return None
    found = value.get("id")
    if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
        return found
    return None


def _keep_short_int(text: str) -> int | None:
    return int(text) if len(text.lstrip("-")) <= _MAX_ID_DIGITS else None


def _recover_id(text: str) -> RequestId:
    """The id of text the strict reading refused: a lenient parse (last key wins, long
    integers skipped), else a leading ``"id"`` member."""
    try:
        return _id_of(json.loads(text, parse_int=_keep_short_int))
    except (ValueError, RecursionError):
        pass
    match = _LEADING_ID.match(text)
    if match is None:
        return None
    number, string = match.groups()
    if number is not None:
        return int(number)
    try:
        found = json.loads(f'"{string}"')
    except ValueError:
        return None
    return found if isinstance(found, str) else None


def _sdk_reason(exc: pydantic.ValidationError) -> tuple[bool, str]:
    """Whether the SDK refused the text as JSON (rather than as a message), and why."""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    for error in errors:
        if error["type"] == "json_invalid":
            return True, str(error["msg"])
    return False, "not a JSON-RPC 2.0 request, notification or response"


def _repeated_key(exc: DuplicateKeyError, text: str) -> types.JSONRPCError:
    request_id = None if exc.pointer == "/id" else _recover_id(text)
    return _error(types.PARSE_ERROR, f"Parse error: {exc}", request_id)


def _id_kind(value: object) -> str | None:
    """What a request's ``id`` is when JSON-RPC (as MCP restricts it) does not allow it:
    ``None`` for a string or an integer."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return None
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "a number that is not finite"
        return "a number written with a fraction or an exponent"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _bad_id(value: Any) -> types.JSONRPCError | None:
    """The invalid-request error of a decoded request whose ``id`` is not allowed."""
    if not isinstance(value, dict) or "method" not in value or "id" not in value:
        return None
    kind = _id_kind(value["id"])
    if kind is None:
        return None
    message = f"Invalid Request: the id must be a string or an integer, not {kind}"
    return _error(types.INVALID_REQUEST, message, None)


def body_refusal(body: bytes) -> types.JSONRPCError | None:
    """The error that answers a UTF-8 JSON HTTP ``body`` holding a repeated object key
    (a parse error) or a request whose ``id`` is not allowed (an invalid request);
    ``None`` for any other body, readable or not (the SDK answers what it cannot
    read)."""
    try:
        text = body.decode("utf-8")
        value = decode_json(text)
    except DuplicateKeyError as exc:
        return _repeated_key(exc, text)
    except (ValueError, RecursionError):
        return None
    return _bad_id(value)


def refusal(text: str) -> types.JSONRPCError | None:
    """The error that answers the JSON-RPC message ``text``, or ``None`` if the SDK can
    take it as it is. ``text`` may hold lone surrogates standing for bytes that were
    not UTF-8 (``errors="surrogateescape"``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _error(types.PARSE_ERROR, "Parse error: the message is not UTF-8", _recover_id(text))
    try:
        value = decode_json(text)
    except DuplicateKeyError as exc:
        return _repeated_key(exc, text)
    except json.JSONDecodeError as exc:
        return _error(types.PARSE_ERROR, f"Parse error: {exc}", _recover_id(text))
    except ValueError:  # only the integer digit limit gets here
        return _error(
            types.PARSE_ERROR, "Parse error: a number has too many digits", _recover_id(text)
        )
    except RecursionError:
        return _error(types.PARSE_ERROR, "Parse error: nested too deeply", _recover_id(text))
    bad_id = _bad_id(value)
    if bad_id is not None:
        return bad_id
    try:
        types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except pydantic.ValidationError as exc:
        unreadable, reason = _sdk_reason(exc)
        if unreadable:
            return _error(types.PARSE_ERROR, f"Parse error: {reason}", _id_of(value))
        return _error(types.INVALID_REQUEST, f"Invalid Request: {reason}", _id_of(value))
    return None


Answer = Callable[[types.JSONRPCError], Awaitable[None]]


class ScreenedLines:
    """The lines of ``lines`` that the SDK can take; every other non-blank line is
    answered through the function given to `answer_with` (lines that arrive before it
    is given wait for it). Blank lines carry no message and are skipped."""

    def __init__(self, lines: AsyncIterator[str]) -> None:
        self._lines = lines
        self._answer: Answer | None = None
        self._ready = asyncio.Event()

    def answer_with(self, answer: Answer) -> None:
        self._answer = answer
        self._ready.set()

    async def _send(self, error: types.JSONRPCError) -> None:
        await self._ready.wait()
        if self._answer is not None:
            await self._answer(error)

    def __aiter__(self) -> ScreenedLines:
        return self

    async def __anext__(self) -> str:
        async for line in self._lines:
            if not line.strip():
                continue
            error = refusal(line)
            if error is None:
                return line
            await self._send(error)
        raise StopAsyncIteration
