"""Run inputs: canonical JSON bytes, stored once per session under their SHA-256 digest.

`canonical_json` turns a JSON object into RFC 8785 (JCS) bytes, so equal
inputs always have equal bytes and equal digests. `InputStore` keeps those
bytes in `storage.Blobs` under ``sessions/<sid>/workflows/inputs/sha256/<digest>``
and verifies size and digest on every read. The run registry only ever stores
the `InputReference`, never the input itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, Final

import rfc8785

from flowledger import storage

from ...jsontext import decode_json
from ..errors import ConflictError, CorruptRecordError, InvalidInputError, NotFoundError
from .input_claims import InputClaims
from .run import MAX_INPUT_BYTES, InputReference, input_key, inputs_prefix, is_digest

__all__ = [
    "MAX_INPUT_BYTES",
    "MAX_INPUT_DEPTH",
    "MAX_INPUT_PROPERTIES",
    "InputStore",
    "canonical_json",
    "check_input_document",
]

MAX_INPUT_DEPTH: Final = 32  # nesting levels; objects and arrays both count
MAX_INPUT_PROPERTIES: Final = 4096  # object keys across the whole document

_SAFE_INT: Final = (1 << 53) - 1
_STRINGS: Final = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS: Final = re.compile(rb"[\[\]{}]")


# -- canonical JSON ------------------------------------------------------------------------------


class _Refused(Exception):
    pass


def _number_text_matches(value: float, exact: Decimal) -> bool:
    """Whether the JCS text of ``value`` denotes exactly ``exact``."""
    return Decimal(rfc8785.dumps(value).decode()) == exact


def _plain(value: Any, path: str, depth: int, keys: list[int]) -> Any:
    """``value`` as data rfc8785 serialises, or `_Refused` naming the path."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = str.__str__(value)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise _Refused(f"{path}: string is not valid Unicode (lone surrogate)") from None
        return text
    if isinstance(value, int):
        number = int(value)
        if -_SAFE_INT <= number <= _SAFE_INT:
            return number
        if number.bit_length() > 1024:  # beyond the double range (and str()'s digit limit)
            raise _Refused(f"{path}: a {number.bit_length()}-bit integer has no double form")
        return _inexact(path, number, Decimal(number))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Refused(f"{path}: {value} is not a finite number")
        return float(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise _Refused(f"{path}: {value} is not a finite number")
        return _inexact(path, value, value)
    if isinstance(value, Mapping | list | tuple):
        if depth >= MAX_INPUT_DEPTH:
            raise _Refused(f"{path}: nesting deeper than {MAX_INPUT_DEPTH}")
        if isinstance(value, Mapping):
            keys[0] += len(value)
            if keys[0] > MAX_INPUT_PROPERTIES:
                raise _Refused(f"more than {MAX_INPUT_PROPERTIES} object keys")
            out: dict[str, Any] = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise _Refused(f"{path}: object key {key!r} is not a string")
                name = _plain(key, f"{path}.{key}", depth, keys)
                out[name] = _plain(item, f"{path}.{key}", depth + 1, keys)
            return out
        return [_plain(item, f"{path}[{i}]", depth + 1, keys) for i, item in enumerate(value)]
    raise _Refused(f"{path}: {type(value).__name__} is not a JSON value")


def _inexact(path: str, shown: object, exact: Decimal) -> float:
    try:
        number = float(exact)
    except (OverflowError, InvalidOperation):  # pragma: no cover - float() saturates instead
        number = math.inf
    if not math.isfinite(number) or not _number_text_matches(number, exact):
        text = str(shown)
        if len(text) > 40:
            text = f"{text[:20]}...{text[-10:]} ({len(text)} digits)"
        raise _Refused(f"{path}: {text} has no exact IEEE 754 double form")
    return number


def canonical_json(value: Any, *, field: str = "input") -> bytes:
    """RFC 8785 (JCS) bytes of a JSON object: equal documents give identical bytes.

    ``value`` must be a mapping with string keys (any key order); values may
    be ``None``, ``bool``, ``str``, ``int``, ``float``, `decimal.Decimal`,
    mappings, lists and tuples. Keys are sorted by UTF-16 code units, there is
    no insignificant whitespace, and numbers are written as IEEE 754 doubles
    in ECMAScript form (so ``1``, ``1.0`` and ``Decimal("1.00")`` all give
    ``1``).

    Number rule (we never round silently): a ``float`` is taken as the
    double it is (NaN and infinities are refused); an ``int`` within
    ±(2**53 - 1) is written exactly; a larger ``int`` or any ``Decimal`` is
    converted to the nearest double and accepted only if the JCS text of that
    double denotes exactly the same number: ``Decimal("0.1")`` gives ``0.1``
    and ``10**21`` gives ``1e+21``, but ``Decimal("0.1000000000000000001")``,
    ``2**53 + 1`` and ``2**60`` (whose JCS text is ``1152921504606847000``)
    are refused.

    The document limits of run inputs and resume payloads apply: nesting at
    most `MAX_INPUT_DEPTH` levels, at most `MAX_INPUT_PROPERTIES` keys in
    total, at most `MAX_INPUT_BYTES` encoded bytes. So the result is always
    accepted by `InputStore.put`. Any refusal is `InvalidInputError(field,
    ...)` naming the offending path (``field`` is ``"input"`` or
    ``"resume"``).
    """
    try:
        if not isinstance(value, Mapping):
            raise _Refused(f"must be a JSON object, not {type(value).__name__}")
        data = rfc8785.dumps(_plain(value, "$", 0, [0]))
    except _Refused as exc:
        raise InvalidInputError(field, str(exc)) from None
    except rfc8785.CanonicalizationError as exc:  # pragma: no cover - _plain refuses first
        raise InvalidInputError(field, exc) from None
    if len(data) > MAX_INPUT_BYTES:
        raise InvalidInputError(field, f"{len(data)} bytes; the limit is {MAX_INPUT_BYTES}")
    return data


# -- bounded validity check ----------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def check_input_document(data: bytes) -> None:
    """Raise `ValueError` unless ``data`` is exactly one bounded JSON object.

    Rules: 1..`MAX_INPUT_BYTES` bytes of UTF-8; nesting at most
    `MAX_INPUT_DEPTH` levels (checked by a token scan before parsing, so a
    hostile document cannot exhaust the parser); at most
    `MAX_INPUT_PROPERTIES` object keys in total; no duplicate keys, no
    NaN/Infinity literals; one value only (surrounding whitespace is fine);
    and the value is an object. Unbalanced brackets fail cleanly.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"input must be bytes, not {type(data).__name__}")
    raw = bytes(data)
    if not raw:
        raise ValueError("input is empty")
    if len(raw) > MAX_INPUT_BYTES:
        raise ValueError(f"input is {len(raw)} bytes; the limit is {MAX_INPUT_BYTES}")
    depth = 0
    for match in _BRACKETS.finditer(_STRINGS.sub(b"", raw)):
        if match.group() in (b"[", b"{"):
            depth += 1
            if depth > MAX_INPUT_DEPTH:
                raise ValueError(f"input nests deeper than {MAX_INPUT_DEPTH} levels")
        else:
            depth -= 1
            if depth < 0:
                raise ValueError("input has unbalanced brackets")
    count = 0

    def count_keys(members: int) -> None:
        nonlocal count
        count += members
        if count > MAX_INPUT_PROPERTIES:
            raise ValueError(f"input has more than {MAX_INPUT_PROPERTIES} object keys")

    try:
        doc = decode_json(
            raw.decode("utf-8"), parse_constant=_reject_constant, on_object=count_keys
        )
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"input must contain one JSON object: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError("input must contain one JSON object")


# -- the store -----------------------------------------------------------------------------------


START_INPUT_WAIT: Final = 10.0


class InputStore:
    """Session-private, digest-addressed run inputs over `storage.Blobs` (workflows-spec §4)."""

    def __init__(self, blobs: storage.Blobs, *, claims: InputClaims | None = None) -> None:
        if not isinstance(blobs, storage.Blobs):
            raise TypeError("InputStore requires a storage.Blobs")
        self._blobs = blobs
        self._claims = claims

    async def keep(self, session_id: str, ref: InputReference, canonical: bytes) -> None:
        """Once the run record referring to ``ref`` exists, and before its input is read:
        make sure a concurrent prune cannot leave the run without its input (waits out
        a prune deleting it, then stores it again; see `input_claims`). Without claims
        (a store nothing prunes) this does nothing."""
        if self._claims is None:
            return
        try:
            await self._claims.keep(session_id, ref.digest, bytes(canonical))
        except storage.BlobConflictError as exc:
            raise ConflictError(
                session_id, None, "digest-addressed input blob contains different bytes"
            ) from exc

    async def put(self, session_id: str, canonical: bytes) -> InputReference:
        """Store ``canonical`` for ``session_id``; return its reference.

        The bytes are stored exactly as given (not re-canonicalised) under
        ``input_key(session_id, sha256(canonical))``; they are copied first, so
        the caller may reuse its buffer. `ValueError` for a missing session ID
        or bytes that fail `check_input_document`; nothing is written then.
        Storing identical bytes again is a no-op returning an identical
        reference; different bytes under the same digest key are a
        `ConflictError`. Other storage errors propagate.
        """
        inputs_prefix(session_id)
        check_input_document(canonical)
        data = bytes(canonical)
        digest = hashlib.sha256(data).hexdigest()
        key = input_key(session_id, digest)
        try:
            await self._blobs.put(key, data)
        except storage.BlobConflictError as exc:
            raise ConflictError(
                session_id, None, "digest-addressed input blob contains different bytes"
            ) from exc
        except Exception as exc:
            exc.add_note("store workflow input")
            raise
        return InputReference(digest=digest, key=key, size=len(data))

    async def get_for_start(
        self, session_id: str, ref: InputReference, *, created_at: datetime, now: datetime
    ) -> bytes:
        """`get`, for seeding a run: a missing blob of a run created less than
        `START_INPUT_WAIT` seconds ago is waited for (that long at most) where inputs are
        pruned (with claims): a prune may have deleted the shared blob just before this
        run's starter stores it again (`keep`, see `input_claims`). ``now`` is the session
        clock's, the one ``created_at`` was stamped from."""
        young = now - created_at < timedelta(seconds=START_INPUT_WAIT)
        deadline = time.monotonic() + START_INPUT_WAIT
        while True:
            try:
                return await self.get(session_id, ref)
            except NotFoundError:
                if self._claims is None or not young or time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(0.02)

    async def get(self, session_id: str, ref: InputReference) -> bytes:
        """The verified bytes ``ref`` points to, read within ``session_id`` only.

        `ValueError` for a missing session ID. A key outside this session's
        input prefix is `NotFoundError` (kind ``input``): another session's
        reference looks absent. A malformed digest, a key that is not this
        session's key for the digest, or a size outside 1..`MAX_INPUT_BYTES`
        is `CorruptRecordError`; so is a stored blob whose length differs
        from ``ref.size`` or whose SHA-256 differs from ``ref.digest``. A
        missing blob is `NotFoundError`; other storage errors propagate.
        """
        prefix = inputs_prefix(session_id)
        if not isinstance(ref, InputReference):
            raise TypeError(f"expected an InputReference, not {type(ref).__name__}")
        digest = ref.digest if isinstance(ref.digest, str) else None
        if not isinstance(ref.key, str) or not ref.key.startswith(prefix):
            raise NotFoundError("input", session_id, digest=digest)
        if not is_digest(ref.digest):
            raise CorruptRecordError(ref.key, "input reference digest is malformed")
        key = input_key(session_id, ref.digest)
        if ref.key != key:
            raise CorruptRecordError(ref.key, "input reference key does not match its digest")
        size = ref.size
        if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= MAX_INPUT_BYTES:
            raise CorruptRecordError(ref.key, f"input reference size {size!r} is out of range")
        try:
            data = await self._blobs.get(key)
        except storage.BlobNotFoundError:
            raise NotFoundError("input", session_id, digest=ref.digest) from None
        except storage.CorruptDataError as exc:
            raise CorruptRecordError(key, exc) from exc
        except Exception as exc:
            exc.add_note("read workflow input")
            raise
        if len(data) > MAX_INPUT_BYTES or len(data) != size:
            raise CorruptRecordError(key, "input blob size does not match its reference")
        if hashlib.sha256(data).hexdigest() != ref.digest:
            raise CorruptRecordError(key, "input blob digest does not match its reference")
        return bytes(data)
