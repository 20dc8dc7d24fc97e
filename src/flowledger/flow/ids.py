"""Identifiers: graph and vertex ids are stable names; run ids are random UUIDs."""

from __future__ import annotations

import os
import re
from typing import Final

from .errors import BuildError

__all__ = ["is_run_id", "new_run_id", "validate_graph_id", "validate_run_id", "validate_vertex_id"]

VERTEX_ID: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")
GRAPH_ID: Final = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
_RUN_ID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def validate_vertex_id(vertex: object, op: str = "add_vertex") -> str:
    if not isinstance(vertex, str) or not VERTEX_ID.fullmatch(vertex):
        raise BuildError(op, f"vertex id {vertex!r} must match {VERTEX_ID.pattern}")
    return vertex


def validate_graph_id(graph_id: object) -> str:
    if not isinstance(graph_id, str) or not GRAPH_ID.fullmatch(graph_id):
        raise BuildError("Graph", f"graph id {graph_id!r} must match {GRAPH_ID.pattern}")
    return graph_id


def new_run_id() -> str:
    """A fresh random (version 4) UUID in canonical lowercase form."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def is_run_id(text: object) -> bool:
    return isinstance(text, str) and _RUN_ID.fullmatch(text) is not None


def validate_run_id(text: object) -> str:
    """Return ``text`` if it is a canonical lowercase UUID, else raise `ValueError`."""
    if not is_run_id(text):
        raise ValueError(f"run id {text!r} is not a canonical lowercase UUID")
    assert isinstance(text, str)
    return text
