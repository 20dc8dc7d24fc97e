"""The built-in example: a document review.

``intake`` normalises the document; three analyses run in parallel (``style``,
``facts``, ``summarize`` - which fails on its first attempt, like a flaky model endpoint,
and is retried); ``report`` joins them; ``approval`` pauses for a person or a model to
decide; ``finalize`` records the decision.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from pydantic import BaseModel, Field

from .. import flow
from ..workflows import Metadata, TypedDefinition, VertexMetadata

__all__ = ["Review", "review_definition"]

STEP_SECONDS = 0.15  # a little time per step, so progress is visible
_flaky_seen: set[str] = set()


class Review(BaseModel):
    title: str
    document: str
    words: int = 0
    style_issues: list[str] = Field(default_factory=list)
    flagged_claims: list[str] = Field(default_factory=list)
    summary: str = ""
    report: str = ""
    approved: bool | None = None
    reviewer_note: str = ""
    published: bool = False


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


async def intake(state: Review) -> dict[str, Any]:
    await asyncio.sleep(STEP_SECONDS)
    document = " ".join(state.document.split())
    return {"document": document, "words": len(document.split())}


async def style(state: Review) -> dict[str, Any]:
    await asyncio.sleep(STEP_SECONDS)
    long = [s for s in _sentences(state.document) if len(s.split()) > 25]
    return {"style_issues": [f"long sentence ({len(s.split())} words)" for s in long]}


async def facts(state: Review) -> dict[str, Any]:
    await asyncio.sleep(STEP_SECONDS)
    claims = [s for s in _sentences(state.document) if re.search(r"\d", s)]
    return {"flagged_claims": [f"check the figure in: {s[:60]}" for s in claims]}


async def summarize(state: Review) -> dict[str, Any]:
    await asyncio.sleep(STEP_SECONDS)
    key = flow.run_info().idempotency_key
    if key not in _flaky_seen:  # the first attempt of each execution fails
        _flaky_seen.add(key)
        raise TimeoutError("the summarizer timed out")
    sentences = _sentences(state.document)
    return {"summary": sentences[0] if sentences else ""}


async def report(state: Review) -> dict[str, Any]:
    await asyncio.sleep(STEP_SECONDS)
    lines = [
        f"{state.title}: {state.words} words",
        f"style: {len(state.style_issues)} issue(s)",
        f"facts: {len(state.flagged_claims)} claim(s) to check",
        f"summary: {state.summary}",
    ]
    return {"report": "\n".join(lines)}


async def approval(state: Review) -> dict[str, Any]:
    answer = flow.interrupt(
        {
            "question": f"Publish {state.title!r}?",
            "style_issues": len(state.style_issues),
            "flagged_claims": len(state.flagged_claims),
        }
    )
    return {"approved": bool(answer["approved"]), "reviewer_note": answer.get("note", "")}


async def finalize(state: Review) -> dict[str, Any]:
    await asyncio.sleep(STEP_SECONDS)
    return {"published": bool(state.approved)}


def review_graph() -> flow.Graph[Review]:
    graph: flow.Graph[Review] = flow.Graph("document_review", state=Review)
    graph.add_vertex("intake", intake)
    graph.add_vertex("style", style)
    graph.add_vertex("facts", facts)
    graph.add_vertex("summarize", summarize, retry=flow.Retry(3, backoff=0.1))
    graph.add_vertex("report", report)
    graph.add_vertex("approval", approval)
    graph.add_vertex("finalize", finalize)
    for branch in ("style", "facts", "summarize"):
        graph.add_edge("intake", branch)
        graph.add_edge(branch, "report")
    graph.add_edge("report", "approval")
    graph.add_edge("approval", "finalize")
    return graph


INPUT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["title", "document"],
    "properties": {
        "title": {"type": "string", "minLength": 1, "maxLength": 200},
        "document": {"type": "string", "minLength": 1, "maxLength": 20000},
    },
}
RESUME_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["approved"],
    "properties": {
        "approved": {"type": "boolean"},
        "note": {"type": "string", "maxLength": 500},
    },
}

LABELS = {
    "intake": "intake",
    "style": "style check",
    "facts": "fact check",
    "summarize": "summary",
    "report": "report",
    "approval": "approval",
    "finalize": "finalize",
}


def _summary(state: Review) -> str:
    if state.approved is None:
        return f"reviewed {state.words} words"
    return "published" if state.published else "rejected"


def review_definition(store: flow.CheckpointStore | None = None) -> TypedDefinition[Review]:
    runner = review_graph().compile(entry="intake", finish="finalize", store=store, version="1")
    metadata = Metadata(
        "document_review",
        "v1",
        description=(
            "Review a document: style and fact checks and a summary in parallel, "
            "then a human approval before publishing."
        ),
        input_schema=INPUT_SCHEMA,
        resume_schema=RESUME_SCHEMA,
        vertices=[VertexMetadata(label, vertex) for vertex, label in LABELS.items()],
    )
    return TypedDefinition(metadata, runner, summarizer=_summary)
