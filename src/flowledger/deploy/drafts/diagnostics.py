"""What a draft's document still needs: `diagnose` validates it as an artifact and
answers every issue with a JSON Pointer to its place and the next actions to take.

A diagnostic is an artifact issue (``place``, ``code``, ``message``, ``hint``) plus
``pointer`` (RFC 6901, what a ``draft_patch`` operation's ``path`` names; ``""`` is the
whole document) and ``next_actions``: concrete tool calls: first the actions that fix
the issue when a check knows them (the catalog's checks,
`flowledger.deploy.drafts.contracts`; for an ``unreachable_node``, the ``draft_connect``
from each node that continues where it does, which puts it on that path), then those
every diagnostic of its code gets (`guidance.next_actions`: the code's rules, ``explain``
of the code, and a ``draft_get`` to read the current revision before patching).
Messages are clipped to `MAX_MESSAGE_CHARS` so a stored draft stays bounded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ...workflows.authoring.guidance import next_actions
from ..artifacts.errors import ROOT_PLACE, ArtifactIssue, ArtifactValidationError
from ..artifacts.validate import validate_artifact
from ..artifacts.validated import ValidatedArtifact
from .edits import CONTINUING

__all__ = ["MAX_MESSAGE_CHARS", "Diagnosis", "action", "diagnose", "diagnostic", "pointer_of"]

MAX_MESSAGE_CHARS: Final = 500
_SEGMENT: Final = re.compile(r'\.?([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]')


def pointer_of(place: str) -> str:
    """The JSON Pointer of an artifact place (``nodes.a.cases[0].when`` ->
    ``/nodes/a/cases/0/when``; ``$`` -> ``""``)."""
    if place == ROOT_PLACE:
        return ""
    parts: list[str] = []
    position = 0
    while position < len(place):
        match = _SEGMENT.match(place, position)
        if match is None:  # not a place this module knows how to read: point at the root
            return ""
        name, index, quoted = match.groups()
        if name is not None:
            parts.append(name)
        elif index is not None:
            parts.append(index)
        else:
            parts.append(re.sub(r"\\(.)", r"\1", quoted))
        position = match.end()
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."


def action(tool: str, /, **arguments: Any) -> dict[str, Any]:
    """A next action: the call of ``tool`` with ``arguments``."""
    return {"tool": tool, "arguments": arguments}


def diagnostic(
    issue: ArtifactIssue, draft: str, actions: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """One issue of draft ``draft`` as a diagnostic (see the module); ``actions`` fix it
    and come first."""
    guided = next_actions(issue.code, {"draft": draft})
    return {
        "place": issue.place,
        "pointer": pointer_of(issue.place),
        "code": issue.code,
        "message": _clip(issue.message),
        "hint": _clip(issue.hint),
        "next_actions": [*actions, *(item for item in guided if item not in actions)],
    }


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """``valid`` with the artifact's ``digest``, or the ``diagnostics`` (``truncated``
    when validation stopped at its bound). ``validated`` is the artifact when its own
    checks passed (the catalog's checks may still have found issues); ``capabilities``
    are the tools the catalog's checks found, with their contract fingerprints."""

    valid: bool
    digest: str | None
    diagnostics: tuple[dict[str, Any], ...]
    truncated: bool = False
    validated: ValidatedArtifact | None = field(default=None, compare=False)
    capabilities: tuple[dict[str, Any], ...] = ()


#: At most this many routing suggestions per unreachable node.
MAX_ROUTES: Final = 3


def routes_to(document: Any, place: str, draft: str, revision: int) -> list[dict[str, Any]]:
    """The ``draft_connect`` calls that would reach the node at ``place`` (an unreachable
    one): from each node that continues at the node's own ``next``, so connecting it
    puts the node between them (a step added but not yet routed to)."""
    parts = pointer_of(place).split("/")
    nodes = document.get("nodes") if isinstance(document, dict) else None
    if len(parts) != 3 or parts[1] != "nodes" or not isinstance(nodes, dict):
        return []
    node_id = parts[2].replace("~1", "/").replace("~0", "~")
    node = nodes.get(node_id)
    after = node.get("next") if isinstance(node, dict) else None
    if not isinstance(after, str):
        return []
    sources = sorted(
        other
        for other, value in nodes.items()
        if other != node_id
        and isinstance(value, dict)
        and value.get("kind") in CONTINUING
        and value.get("next") == after
    )
    return [
        action(
            "draft_connect", **{"draft": draft, "revision": revision, "from": source, "to": node_id}
        )
        for source in sources[:MAX_ROUTES]
    ]


def diagnose(document: Any, draft: str, revision: int | None = None) -> Diagnosis:
    """``revision``: the one the document is stored as, which fixing actions name."""
    try:
        validated = validate_artifact(document)
    except ArtifactValidationError as exc:

        def fixes(issue: ArtifactIssue) -> list[dict[str, Any]]:
            if issue.code != "unreachable_node" or revision is None:
                return []
            return routes_to(document, issue.place, draft, revision)

        return Diagnosis(
            False,
            None,
            tuple(diagnostic(issue, draft, fixes(issue)) for issue in exc.issues),
            exc.truncated,
        )
    return Diagnosis(True, validated.digest, (), validated=validated)
