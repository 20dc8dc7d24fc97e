"""A foreach's inline node sequence (``body: {kind: sequence, state, start, nodes}``) as
an artifact of its own.

A sequence is validated and compiled like an anonymous child artifact: `as_artifact`
gives that artifact (the parent's name, version, input schema and dependencies; the
sequence's own state, start and nodes), which the checker validates with ``item`` and
``index`` in scope and the compiler runs per item as a nested run, exactly as it runs a
child body (`flowledger.deploy.runs.compile`). A sequence has no output schema: its end
nodes' outputs are the item's result as they are. `SEQUENCE_NODE_KINDS` are the node
kinds it may hold: nothing that pauses (a foreach item cannot) and no child artifact
(a child per item is a ``workflow`` body).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Final

from .model import ARTIFACT_FORMAT, Artifact, ForeachNode, ForeachSequenceBody, Node

__all__ = ["SEQUENCE_NODE_KINDS", "as_artifact", "sequence_nodes"]

SEQUENCE_NODE_KINDS: Final = ("tool", "set", "switch", "parallel", "foreach", "end")


def as_artifact(parent: Artifact, body: ForeachSequenceBody) -> Artifact:
    """The anonymous artifact of ``body``, a foreach body of ``parent``."""
    return Artifact(
        format=ARTIFACT_FORMAT,
        name=parent.name,
        version=parent.version,
        input_schema=parent.input_schema,
        output_schema={},  # not checked: a sequence's end outputs are results as they are
        dependencies=parent.dependencies,
        state=body.state,
        start=body.start,
        nodes=body.nodes,
    )


def sequence_nodes(nodes: Mapping[str, Node]) -> Iterator[Node]:
    """Every node of ``nodes`` and, recursively, of the sequence bodies among them."""
    for node in nodes.values():
        yield node
        if isinstance(node, ForeachNode) and isinstance(node.body, ForeachSequenceBody):
            yield from sequence_nodes(node.body.nodes)
