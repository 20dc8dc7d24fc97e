"""The documented bounds of an artifact (docs/deploy.md, "Limits"), enforced at validation.

They keep every artifact cheap to parse, validate, store and compile, and keep a
hostile document from costing more than linear time.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "MAX_ARTIFACT_BYTES",
    "MAX_BRANCHES",
    "MAX_CASES",
    "MAX_CHILDREN",
    "MAX_CHILD_DEPTH",
    "MAX_CLOSURE_ARTIFACTS",
    "MAX_DEPENDENCIES",
    "MAX_DOCUMENT_DEPTH",
    "MAX_EXPRESSIONS",
    "MAX_EXPRESSION_CHARS",
    "MAX_NODES",
    "MAX_RESULT_VALUES",
    "MAX_SOURCE_BYTES",
    "MAX_STATE_FIELDS",
    "MAX_TOOLS_PER_DEPENDENCY",
]

MAX_SOURCE_BYTES: Final = 1 << 20  # authored YAML or JSON text, comments included
MAX_ARTIFACT_BYTES: Final = 256 << 10  # the canonical (stored) form
MAX_DOCUMENT_DEPTH: Final = 48  # nested objects and arrays; schemas inside have their own 32
MAX_NODES: Final = 256
MAX_STATE_FIELDS: Final = 256
MAX_DEPENDENCIES: Final = 32
MAX_TOOLS_PER_DEPENDENCY: Final = 128
MAX_CHILDREN: Final = 32
MAX_CASES: Final = 64  # per switch
MAX_BRANCHES: Final = 16  # per parallel
MAX_EXPRESSION_CHARS: Final = 2048  # one expression, between ``${`` and ``}``
MAX_EXPRESSIONS: Final = 4096  # per artifact
MAX_CHILD_DEPTH: Final = 8  # levels of saved children below an artifact
MAX_CLOSURE_ARTIFACTS: Final = 64  # distinct artifacts in an artifact and its children
MAX_RESULT_VALUES: Final = 100_000  # JSON values one evaluated template may produce
