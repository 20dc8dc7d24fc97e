"""The graph checks of an artifact: references, reachability, ends, parallel branches.

`check_graph` runs once every node's structure is sound; it appends issues and returns
the node sets of each parallel node's branches (`ValidatedArtifact.branches`).
"""

from __future__ import annotations

from .errors import ArtifactIssue, choices, place_of
from .model import (
    Artifact,
    EndNode,
    ForeachNode,
    InterruptNode,
    Node,
    ParallelNode,
    SwitchNode,
    ToolNode,
)

__all__ = ["check_graph", "targets"]


def targets(node_id: str, node: Node) -> list[tuple[str, tuple[str | int, ...]]]:
    """The nodes ``node_id`` may continue at, each with the path that names it (a
    parallel node continues at its branches; the join is reached through them)."""
    base: tuple[str | int, ...] = ("nodes", node_id)
    if isinstance(node, SwitchNode):
        found = [(case.next, (*base, "cases", i, "next")) for i, case in enumerate(node.cases)]
        return [*found, (node.default, (*base, "default"))]
    if isinstance(node, ParallelNode):
        return [(branch, (*base, "branches", i)) for i, branch in enumerate(node.branches)]
    if isinstance(node, EndNode):
        return []
    if isinstance(node, ToolNode) and node.on_error is not None:
        return [(node.next, (*base, "next")), (node.on_error.next, (*base, "on_error", "next"))]
    if isinstance(node, InterruptNode) and node.timeout_next is not None:
        return [(node.next, (*base, "next")), (node.timeout_next, (*base, "timeout_next"))]
    return [(node.next, (*base, "next"))]


def check_graph(
    artifact: Artifact, issues: list[ArtifactIssue]
) -> dict[str, tuple[frozenset[str], ...]]:
    """Append every graph problem to ``issues``; return the branches of each parallel
    node (empty when a reference does not resolve: then nothing else can be judged)."""
    checker = _Graph(artifact, issues)
    if checker.references_resolve():
        checker.reachability()
        checker.parallels()
    return checker.branches


class _Graph:
    def __init__(self, artifact: Artifact, issues: list[ArtifactIssue]) -> None:
        self.artifact = artifact
        self.issues = issues
        self.branches: dict[str, tuple[frozenset[str], ...]] = {}

    def issue(self, place: str, code: str, message: str, hint: str = "") -> None:
        self.issues.append(ArtifactIssue(place, code, message, hint))

    def references_resolve(self) -> bool:
        nodes = self.artifact.nodes
        ok = True
        if self.artifact.start not in nodes:
            ok = False
            self.issue(
                "start",
                "unknown_node",
                f"no node {self.artifact.start!r}",
                choices("nodes", nodes),
            )
        for node_id, node in nodes.items():
            named = list(targets(node_id, node))
            if isinstance(node, ParallelNode):
                named.append((node.join, ("nodes", node_id, "join")))
            for target, path in named:
                if target not in nodes:
                    ok = False
                    self.issue(
                        place_of(*path),
                        "unknown_node",
                        f"no node {target!r}",
                        choices("nodes", nodes),
                    )
        return ok

    def reachability(self) -> None:
        nodes = self.artifact.nodes
        seen = {self.artifact.start}
        pending = [self.artifact.start]
        while pending:
            for target, _ in targets(current := pending.pop(), nodes[current]):
                if target not in seen:
                    seen.add(target)
                    pending.append(target)
        for node_id in nodes:
            if node_id not in seen:
                self.issue(
                    place_of("nodes", node_id),
                    "unreachable_node",
                    "no path from `start` reaches this node",
                    "remove it, or continue at it from another node",
                )
        ends = [node_id for node_id, node in nodes.items() if isinstance(node, EndNode)]
        if not ends:
            self.issue("nodes", "no_end", "there is no `end` node", "add one: a run must finish")
            return
        predecessors: dict[str, set[str]] = {}
        for node_id, node in nodes.items():
            for target, _ in targets(node_id, node):
                predecessors.setdefault(target, set()).add(node_id)
        finishing = set(ends)
        pending = list(ends)
        while pending:
            for source in predecessors.get(pending.pop(), ()):
                if source not in finishing:
                    finishing.add(source)
                    pending.append(source)
        for node_id in nodes:
            if node_id in seen and node_id not in finishing:
                self.issue(
                    place_of("nodes", node_id),
                    "no_way_to_end",
                    "no `end` node can be reached from here: a run would never finish",
                    "give the loop an exit",
                )

    def parallels(self) -> None:
        nodes = self.artifact.nodes
        joins: dict[str, str] = {}
        for node_id, node in nodes.items():
            if not isinstance(node, ParallelNode):
                continue
            base = ("nodes", node_id)
            if node.join in joins:
                self.issue(
                    place_of(*base, "join"),
                    "shared_join",
                    f"{node.join!r} is already the join of parallel {joins[node.join]!r}",
                )
            joins[node.join] = node_id
            if node.join == node_id or node.join in node.branches:
                self.issue(
                    place_of(*base, "join"),
                    "bad_join",
                    "the join is a node after the branches, not the parallel node or a branch",
                )
                continue
            if len(set(node.branches)) != len(node.branches):
                self.issue(place_of(*base, "branches"), "duplicate", "a branch is listed twice")
                continue
            regions = [self._region(node_id, node, index) for index in range(len(node.branches))]
            self.branches[node_id] = tuple(frozenset(region) for region in regions)
            self._branch_rules(node_id, node, regions)

    def _region(self, parallel_id: str, node: ParallelNode, index: int) -> set[str]:
        nodes = self.artifact.nodes
        branch = node.branches[index]
        region = {branch}
        pending = [branch]
        reaches_join = False
        while pending:
            current = pending.pop()
            for target, _ in targets(current, nodes[current]):
                if target == node.join:
                    reaches_join = True
                elif target not in region:
                    region.add(target)
                    pending.append(target)
        if not reaches_join:
            self.issue(
                place_of("nodes", parallel_id, "branches", index),
                "branch_without_join",
                f"branch {branch!r} never reaches the join {node.join!r}",
                "every branch continues at the join when it is done",
            )
        return region

    def _branch_rules(self, parallel_id: str, node: ParallelNode, regions: list[set[str]]) -> None:
        nodes = self.artifact.nodes
        base = ("nodes", parallel_id)
        inside = set().union(*regions)
        for index, region in enumerate(regions):
            branch = node.branches[index]
            if parallel_id in region:
                self.issue(
                    place_of(*base, "branches", index),
                    "branch_loop",
                    f"branch {branch!r} leads back to its parallel node",
                )
            for member in sorted(region):
                current = nodes[member]
                if isinstance(current, EndNode):
                    self.issue(
                        place_of("nodes", member),
                        "end_in_branch",
                        f"an end node inside branch {branch!r} of parallel {parallel_id!r}",
                        "a branch continues at the join; end the run after the join",
                    )
                if isinstance(current, ParallelNode) and current.join not in region:
                    self.issue(
                        place_of("nodes", member, "join"),
                        "bad_join",
                        f"a parallel inside branch {branch!r} must join inside that branch",
                    )
            for other in range(index):
                shared = region & regions[other]
                if shared:
                    self.issue(
                        place_of(*base, "branches", index),
                        "shared_branch_node",
                        f"branches {node.branches[other]!r} and {branch!r} share "
                        f"{', '.join(repr(n) for n in sorted(shared)[:5])}",
                        "a node belongs to one branch",
                    )
        for source_id, source in nodes.items():
            if source_id == parallel_id:
                continue
            for target, path in targets(source_id, source):
                for index, region in enumerate(regions):
                    if target in region and source_id not in region:
                        self.issue(
                            place_of(*path),
                            "into_branch",
                            f"{target!r} is inside branch {node.branches[index]!r} of parallel "
                            f"{parallel_id!r}",
                            "a branch is entered only through its parallel node",
                        )
                if target == node.join and source_id not in inside:
                    self.issue(
                        place_of(*path),
                        "into_join",
                        f"{target!r} is the join of parallel {parallel_id!r}; only its branches "
                        "continue there",
                    )
        written = [self._writes(region) for region in regions]
        for index in range(len(regions)):
            for other in range(index):
                for name in sorted(written[index] & written[other]):
                    spec = self.artifact.state.get(name)
                    if spec is not None and spec.reduce == "replace":
                        self.issue(
                            place_of(*base, "branches", index),
                            "conflicting_writes",
                            f"branches {node.branches[other]!r} and {node.branches[index]!r} "
                            f"both write state field {name!r}, whose reducer is replace",
                            f"set state.{name}.reduce to append, merge or sum, or write "
                            "different fields",
                        )

    def _writes(self, region: set[str]) -> set[str]:
        fields: set[str] = set()
        for member in region:
            current = self.artifact.nodes[member]
            assign = getattr(current, "assign", None)
            if isinstance(assign, dict):
                fields.update(assign)
            if isinstance(current, ToolNode) and current.on_error is not None:
                fields.update(current.on_error.assign)
            if isinstance(current, ForeachNode):
                fields.add(current.into)
        return fields
