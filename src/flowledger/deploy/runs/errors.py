"""Errors raised while an artifact compiles or one of its nodes executes.

Execution errors are what a node raises inside a run; under the deploy layer's
``on_error="fail"`` they fail the run, and the run's ``error`` shows their type and
message. Each has a stable ``code`` for programs. Messages name nodes, dependencies and
tools, never argument or result values.
"""

from __future__ import annotations

__all__ = [
    "ArtifactCompileError",
    "ForeachChildError",
    "ForeachItemError",
    "ForeachItemsError",
    "NodeExecutionError",
    "NodeOutputError",
    "ToolContractChangedError",
    "ToolErrorResult",
    "ToolOutcomeUnknownError",
    "ToolResultTooLargeError",
]


class ArtifactCompileError(ValueError):
    """An artifact (with its children) cannot be turned into a flow graph; ``place`` names
    where (``nodes.review``), like a validation issue."""

    def __init__(self, place: str, message: str) -> None:
        self.place = place
        super().__init__(f"{place}: {message}")


class NodeExecutionError(Exception):
    code = "node_failed"

    def __init__(self, node: str, message: str) -> None:
        self.node = node
        super().__init__(f"node {node}: {message}")


class ToolErrorResult(NodeExecutionError):
    """The tool answered with an error result."""

    code = "tool_error"


class ToolOutcomeUnknownError(NodeExecutionError):
    """A call of a tool that is neither read-only nor idempotent was under way when the
    run's owner stopped; whether it took effect is unknown, so it is not called again."""

    code = "tool_outcome_unknown"


class ToolContractChangedError(NodeExecutionError):
    """The tool's contract fingerprint differs from the one the run pinned, under a drift
    policy that blocks that; the tool was not called."""

    code = "schema_drift"


class ToolResultTooLargeError(NodeExecutionError):
    code = "tool_result_too_large"


class NodeOutputError(NodeExecutionError):
    """A value a node computed does not match the schema it must (a child's input, an
    end node's output)."""

    code = "schema_mismatch"


class ForeachItemsError(NodeExecutionError):
    """A foreach node's ``items`` did not give an array, or gave more elements than the
    limit; no item was run."""

    code = "foreach_items"


class ForeachItemError(NodeExecutionError):
    """An item of a foreach node with ``on_item_error: fail`` failed (the message names
    the item's index and its error's code)."""

    code = "foreach_item_failed"


class ForeachChildError(NodeExecutionError):
    """The child run of a foreach item failed in a way ``on_item_error`` decides about
    (see `flowledger.deploy.runs.foreach`); ``code`` is the code of the child's error
    (``schema_mismatch`` when the item's input does not match the child's input schema),
    and the message names the item, the child and the child's node."""

    def __init__(self, node: str, message: str, code: str) -> None:
        super().__init__(node, message)
        self.code = code
