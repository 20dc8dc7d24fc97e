"""The trace tests' application catalog (``--app tests.observability.app:catalog``, run
from the repository root): ``traced`` 1, an artifact calling ``meta_server.py``'s ``note``
in two parallel branches, pausing for a person, then calling it once more.

Its input (``secret``), state, request, resume payload and tool results all carry what
the test passes as ``secret``, so a span holding any of them is found by a scan."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from flowledger.deploy import StdioSource, compile_artifact, validate_artifact
from flowledger.workflows import Catalog

REPO = Path(__file__).resolve().parents[2]

_NOTE = {"kind": "tool", "dependency": "meta", "tool": "note"}

ARTIFACT: dict[str, Any] = {
    "format": "flowledger.artifact/v1",
    "name": "traced",
    "version": "1",
    "input_schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["secret"],
        "properties": {"secret": {"type": "string"}},
    },
    "output_schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["said"],
        "properties": {"said": {"type": "string"}},
    },
    "dependencies": {"meta": {"tools": ["note"]}},
    "state": {"left": {}, "right": {}, "said": {}},
    "start": "fan",
    "nodes": {
        "fan": {"kind": "parallel", "branches": ["left", "right"], "join": "ask"},
        "left": {
            **_NOTE,
            "arguments": {"text": "${ input.secret }"},
            "assign": {"left": "${ result.text }"},
            "next": "ask",
        },
        "right": {
            **_NOTE,
            "arguments": {"text": "${ input.secret }"},
            "assign": {"right": "${ result.text }"},
            "next": "ask",
        },
        "ask": {
            "kind": "interrupt",
            "request": {"question": "Say it again?", "heard": "${ state.left }"},
            "resume_schema": {
                "type": "object",
                "additionalProperties": False,
                "required": ["say"],
                "properties": {"say": {"type": "string"}},
            },
            "assign": {"said": "${ resume.say }"},
            "next": "again",
        },
        "again": {
            **_NOTE,
            "arguments": {"text": "${ state.said }"},
            "assign": {"said": "${ result.text }"},
            "next": "done",
        },
        "done": {"kind": "end", "outcome": "said", "output": {"said": "${ state.said }"}},
    },
}


def meta_source() -> StdioSource:
    """``meta_server.py`` (the folder it records calls in: ``META_DIR``)."""
    return StdioSource(
        sys.executable,
        ["-m", "tests.observability.meta_server"],
        env={"META_DIR": os.environ.get("META_DIR", "")},
        cwd=str(REPO),
    )


def catalog() -> Catalog:
    definitions = Catalog()
    definitions.register(
        compile_artifact(validate_artifact(ARTIFACT), sources={"meta": meta_source()})
    )
    return definitions
