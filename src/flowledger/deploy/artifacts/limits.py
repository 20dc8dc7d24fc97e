"""The documented bounds of an artifact (docs/deploy.md, "Limits").

Most are enforced at validation: they keep every artifact cheap to parse, validate,
store and compile, and keep a hostile document from costing more than linear time.
The last ones bound each evaluation of a template or condition at run time
(`flowledger.deploy.artifacts.budget`): an expression is short, but what it builds need
not be (each doubling of a string or list doubles the next one).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "MAX_ARTIFACT_BYTES",
    "MAX_BRANCHES",
    "MAX_BUILT_VALUES",
    "MAX_CASES",
    "MAX_CHILDREN",
    "MAX_CHILD_DEPTH",
    "MAX_CLOSURE_ARTIFACTS",
    "MAX_DEPENDENCIES",
    "MAX_DOCUMENT_DEPTH",
    "MAX_EVALUATION_STEPS",
    "MAX_EXPRESSIONS",
    "MAX_EXPRESSION_CHARS",
    "MAX_FOREACH_CONCURRENCY",
    "MAX_FOREACH_ITEMS",
    "MAX_NODES",
    "MAX_RESULT_VALUES",
    "MAX_SOURCE_BYTES",
    "MAX_STATE_FIELDS",
    "MAX_TOOLS_PER_DEPENDENCY",
    "MAX_VALUE_BYTES",
    "MEASURED_BYTES_PER_STEP",
    "TEXT_BYTES_PER_STEP",
    "VALUES_PER_STEP",
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
# A foreach: items per visit (checked at run time, when the list is known; each item is
# a durable state key, and a serial foreach takes a super-step per item) and items in
# flight at once (a concurrent foreach runs that many per super-step).
MAX_FOREACH_ITEMS: Final = 1000
MAX_FOREACH_CONCURRENCY: Final = 16
MAX_EXPRESSION_CHARS: Final = 2048  # one expression, between ``${`` and ``}``
MAX_EXPRESSIONS: Final = 4096  # per artifact
MAX_CHILD_DEPTH: Final = 8  # levels of saved children below an artifact
MAX_CLOSURE_ARTIFACTS: Final = 64  # distinct artifacts in an artifact and its children
# One evaluation (a template, all its expressions together, or a condition):
MAX_RESULT_VALUES: Final = 100_000  # JSON values in its result
MAX_BUILT_VALUES: Final = 1_000_000  # JSON values in any value it builds, repeats counted
MAX_VALUE_BYTES: Final = 2 << 20  # text (UTF-8 of strings and keys) in any of those values
MAX_EVALUATION_STEPS: Final = 1_000_000  # node visits, plus measuring and building values:
VALUES_PER_STEP: Final = 4  # JSON values measured in a value, per step
MEASURED_BYTES_PER_STEP: Final = 1024  # bytes of text measured in a value, per step
TEXT_BYTES_PER_STEP: Final = 16  # bytes of text built (join, to_string, reverse), per step
