"""Where a LangGraph thread lives in a flowledger store: ledger log and lease names.

The checkpoints and writes of thread ``T``, namespace ``N`` are the ledger log
``<prefix>/threads/<t>/<n>/<g>``: ``<t>`` and ``<n>`` are name segments for ``T`` and
``N``, ``<g>`` the log's *generation* (1, 2, ...). Rewriting a thread's history (prune,
delete a run) writes the next generation and drops the old one; the highest existing
generation is the current one.

A thread id (or namespace) that is already a short lowercase name segment without a dot
(``[a-z0-9][a-z0-9_-]{0,127}``: lowercase UUIDs, ``user-42``) is its own segment. Any
other text is ``x.`` and its UTF-8 bytes in lowercase base32, or, when that is longer
than 200 characters, ``h.`` and its SHA-256 (the true id is in the log's first record).
The root namespace ``""`` is ``r.``. The forms with a dot never equal a plain one, so
distinct ids never share a segment (short of a SHA-256 collision). The single-writer
lease of thread ``T`` is ``<prefix>/leases/<t>``.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from typing import Final

from ...storage import validate_name
from .errors import InvalidConfigError

__all__ = [
    "DEFAULT_PREFIX",
    "LogName",
    "check_prefix",
    "decode_segment",
    "lease_name",
    "log_name",
    "parse_log_name",
    "segment",
    "segment_log_name",
    "thread_prefix",
    "threads_prefix",
]

DEFAULT_PREFIX: Final = "langgraph"
ROOT: Final = "r."
_PLAIN: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,127}")
_MAX_ENCODED: Final = 200


def check_prefix(prefix: str) -> str:
    try:
        return validate_name(prefix)
    except (ValueError, TypeError) as exc:
        raise InvalidConfigError("prefix", str(exc)) from None


def segment(text: str, *, namespace: bool = False) -> str:
    """The name segment of a thread id or namespace (see the module documentation)."""
    if namespace and text == "":
        return ROOT
    if _PLAIN.fullmatch(text):
        return text
    encoded = (
        "x." + base64.b32encode(text.encode("utf-8", "surrogatepass")).decode().rstrip("=").lower()
    )
    if len(encoded) <= _MAX_ENCODED:
        return encoded
    return "h." + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def decode_segment(part: str) -> str | None:
    """The id a segment names, or None for a hashed one (read the log's first record)."""
    if part == ROOT:
        return ""
    if part.startswith("x."):
        body = part[2:].upper()
        body += "=" * (-len(body) % 8)
        try:
            return base64.b32decode(body).decode("utf-8", "surrogatepass")
        except ValueError:
            return None
    if part.startswith("h."):
        return None
    return part


def threads_prefix(prefix: str) -> str:
    return f"{prefix}/threads/"


def thread_prefix(prefix: str, thread_id: str) -> str:
    """The prefix of every log of one thread (ends with ``/``)."""
    return f"{prefix}/threads/{segment(thread_id)}/"


def log_name(prefix: str, thread_id: str, checkpoint_ns: str, generation: int) -> str:
    name = (
        f"{thread_prefix(prefix, thread_id)}{segment(checkpoint_ns, namespace=True)}/{generation}"
    )
    try:
        return validate_name(name)
    except ValueError as exc:  # only a prefix near the length limit gets here
        raise InvalidConfigError("thread_id", f"too long for a log name ({exc})") from None


def segment_log_name(prefix: str, thread_id: str, ns_segment: str, generation: int) -> str:
    """A log name from a namespace's segment (as `parse_log_name` gives it)."""
    return validate_name(f"{thread_prefix(prefix, thread_id)}{ns_segment}/{generation}")


def lease_name(prefix: str, thread_id: str) -> str:
    return validate_name(f"{prefix}/leases/{segment(thread_id)}")


@dataclass(frozen=True)
class LogName:
    """A log name taken apart: the thread and namespace segments and the generation."""

    name: str
    thread_segment: str
    ns_segment: str
    generation: int


def parse_log_name(prefix: str, name: str) -> LogName | None:
    """Split ``<prefix>/threads/<t>/<n>/<g>``; None for a name of another shape."""
    head = threads_prefix(prefix)
    if not name.startswith(head):
        return None
    parts = name[len(head) :].split("/")
    if len(parts) != 3 or not parts[2].isdigit():
        return None
    return LogName(name, parts[0], parts[1], int(parts[2]))
