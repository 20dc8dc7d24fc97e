"""``--app module:attribute``: a user's catalog instead of the built-in examples."""

from __future__ import annotations

import textwrap

from .conftest import Cli

APP = textwrap.dedent(
    """
    from pydantic import BaseModel

    from flowledger import flow
    from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata


    class Greeting(BaseModel):
        name: str
        text: str = ""


    async def greet(state: Greeting) -> dict:
        return {"text": f"hello {state.name}"}


    def catalog() -> Catalog:
        graph = flow.Graph("greeting", state=Greeting)
        graph.add_vertex("greet", greet)
        runner = graph.compile(entry="greet", finish="greet", version="1")
        metadata = Metadata(
            "greeting",
            "v1",
            description="Say hello.",
            input_schema={
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {"name": {"type": "string"}},
            },
            vertices=[VertexMetadata("greet", "greet")],
        )
        examples = Catalog()
        examples.register(TypedDefinition(metadata, runner, summarizer=lambda s: s.text))
        return examples
    """
)


def test_a_user_catalog(cli: Cli) -> None:
    (cli.cwd / "cli_greeting_app.py").write_text(APP, encoding="utf-8")
    app = ["--app", "cli_greeting_app:catalog"]

    listed = cli.json("definitions", *app)
    assert [(d["name"], d["resume_supported"]) for d in listed["definitions"]] == [
        ("greeting", False)
    ]

    started = cli("start", "greeting", "v1", "--input", '{"name": "Ada"}', *app)
    assert started.exit_code == 0, started.output
    assert "greet" in started.stdout and "1/1" in started.stdout
    assert "is completed (hello Ada)" in started.stdout

    runs = cli.json("runs", "list", *app)["runs"]
    assert [(r["definition_name"], r["run_status"]) for r in runs] == [("greeting", "completed")]

    # the built-in catalog does not know this definition, but reading still works
    assert cli.json("runs", "list")["runs"] == runs
    demo = cli("demo", "--app", "cli_greeting_app:catalog")
    assert demo.exit_code == 2  # demo always uses the built-in example: no --app
