"""The catalog: workflows-spec §2 and checklist §12.6-12."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from flowledger import flow
from flowledger.workflows.authoring.definition import Definition, TypedDefinition
from flowledger.workflows.authoring.metadata import Metadata, VertexMetadata
from flowledger.workflows.errors import (
    DuplicateDefinitionError,
    InvalidInputError,
    InvalidSchemaError,
    UnknownDefinitionError,
)
from flowledger.workflows.runtime.catalog import Catalog

from ..authoring.test_definition import (
    INPUT_SCHEMA,
    RESUME_SCHEMA,
    Counter,
    counter_definition,
    counter_runner,
)

RUN_ID = "00000000-0000-4000-8000-00000000000a"


def closed(**keywords: Any) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, **keywords}


def schema_rejected(catalog: Catalog, schema: Any, field: str = "input") -> InvalidSchemaError:
    keyword = "input_schema" if field == "input" else "resume_schema"
    with pytest.raises(InvalidSchemaError) as caught:
        catalog.register(counter_definition(**{keyword: schema}))
    assert caught.value.field == field
    assert len(catalog) == 0
    return caught.value


def input_refused(definition: Definition, raw: bytes | str) -> InvalidInputError:
    with pytest.raises(InvalidInputError) as caught:
        definition.validate_input(raw)
    assert caught.value.field == "input"
    return caught.value


# -- §12.6-12 ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ab", "Upper_case", "starts-dash", "a" * 65])
def test_checklist_6_bad_names(name: str) -> None:
    """§12.6 names ab, Upper_case, starts-dash, 65xa are rejected (invalid-schema kind)."""
    with pytest.raises(InvalidSchemaError) as caught:
        counter_definition(name=name)
    assert caught.value.field == "name"


def test_checklist_6_duplicates_and_versions() -> None:
    """§12.6 the same name+version twice → duplicate kind; a second version registers."""
    catalog = Catalog()
    catalog.register(counter_definition(version="v1"))
    with pytest.raises(DuplicateDefinitionError) as caught:
        catalog.register(counter_definition(version="v1"))
    assert (caught.value.name, caught.value.version) == ("counter", "v1")
    assert "counter@v1" in str(caught.value)
    catalog.register(counter_definition(version="v2"))
    assert len(catalog) == 2
    assert ("counter", "v1") in catalog and ("counter", "v2") in catalog


def test_checklist_7_schemas_rejected_at_registration() -> None:
    """§12.7 registration rejects (a) a root of type array, (b) an open root object,
    (c) a remote $ref https://..., (d) allOf nested 33 deep."""
    catalog = Catalog()
    schema_rejected(catalog, {"type": "array"})
    schema_rejected(catalog, {"type": "object", "properties": {"count": {"type": "integer"}}})
    schema_rejected(
        catalog,
        closed(properties={"count": {"$ref": "https://example.com/count.json"}}),
    )
    deep: dict[str, Any] = {"type": "integer"}
    for _ in range(33):
        deep = {"allOf": [deep]}
    error = schema_rejected(catalog, closed(properties={"count": deep}))
    assert "deeper than 32" in str(error)


def test_resume_schema_is_checked_too() -> None:
    """§2 the resume schema is compiled at registration (field resume)."""
    schema_rejected(Catalog(), {"type": "object"}, field="resume")


def test_empty_input_schema_fails_at_registration() -> None:
    """§1.2 an empty input schema passes Metadata but registration fails with
    "empty JSON document"."""
    error = schema_rejected(Catalog(), b"")
    assert "empty JSON document" in str(error)


def test_checklist_8_listing() -> None:
    """§12.8 list() is sorted by name then version; each item has description, input
    schema, resume schema and one vertex...; mutating the returned list does not affect
    the catalog; an item's JSON holds name, version, description, input_schema,
    resume_schema, vertices, label; resolving a missing definition → unknown kind."""
    catalog = Catalog()
    for name, version in (("zeta_flow", "v2"), ("alpha_flow", "v2"), ("alpha_flow", "v1")):
        catalog.register(
            TypedDefinition(
                Metadata(
                    name,
                    version,
                    description=f"{name} {version}",
                    input_schema=INPUT_SCHEMA,
                    resume_schema=RESUME_SCHEMA,
                    vertices=[VertexMetadata("Increment", "increment")],
                ),
                counter_runner(),
            )
        )
    listed = catalog.list()
    assert [(m.name, m.version) for m in listed] == [
        ("alpha_flow", "v1"),
        ("alpha_flow", "v2"),
        ("zeta_flow", "v2"),
    ]
    for item in listed:
        assert item.description == f"{item.name} {item.version}"
        assert item.input_schema == INPUT_SCHEMA
        assert item.resume_schema == RESUME_SCHEMA
        assert item.vertices == (VertexMetadata("Increment", "increment"),)
        text = json.dumps(item.to_json())
        for key in (
            "name",
            "version",
            "description",
            "input_schema",
            "resume_schema",
            "vertices",
            "label",
        ):
            assert f'"{key}"' in text
    listed.clear()
    assert len(catalog.list()) == 3
    with pytest.raises(UnknownDefinitionError) as caught:
        catalog.resolve("alpha_flow", "v3")
    assert (caught.value.name, caught.value.version) == ("alpha_flow", "v3")
    with pytest.raises(UnknownDefinitionError):
        catalog.resolve("missing_flow", "v1")


def test_listing_orders_versions_as_plain_strings() -> None:
    """§2 versions sort by plain string order (so v10 comes before v2)."""
    catalog = Catalog()
    for version in ("v2", "v10", "1.0"):
        catalog.register(counter_definition(version=version))
    assert [m.version for m in catalog.list()] == ["1.0", "v10", "v2"]


async def test_checklist_9_schemas_are_cached_at_registration() -> None:
    """§12.9 corrupting the original definition's schema bytes after registration does
    not affect validation through the resolved copy."""
    raw = bytearray(json.dumps(INPUT_SCHEMA).encode())
    metadata = Metadata("counter", "v1", input_schema=raw)  # type: ignore[arg-type]
    original = TypedDefinition(metadata, counter_runner())
    catalog = Catalog()
    catalog.register(original)
    raw[:] = b'{"type":"array"}'.ljust(len(raw))
    resolved = catalog.resolve("counter", "v1")
    token = resolved.validate_input('{"count":1}')
    input_refused(resolved, '{"count":1,"extra":true}')
    assert (await resolved.start(token, graph_run_id=RUN_ID)).state == {"count": 2}
    assert resolved.metadata().input_schema == INPUT_SCHEMA


def test_checklist_10_bad_documents() -> None:
    """§12.10 input validation rejects two concatenated objects, a document over 256 KiB
    (leading whitespace padding) and nesting depth 33."""
    catalog = Catalog()
    loose = closed(properties={"count": {}})
    definition = catalog.register(counter_definition(input_schema=loose))
    assert "trailing JSON value" in str(input_refused(definition, '{"count":1}{"count":2}'))
    padded = b" " * (256 * 1024) + b'{"count":1}'
    assert "262144" in str(input_refused(definition, padded))
    deep = "1"
    for _ in range(32):
        deep = f"[{deep}]"
    assert "deeper than 32" in str(input_refused(definition, '{"count":' + deep + "}"))


def test_checklist_11_property_named_id() -> None:
    """§12.11 a schema with an ordinary property named id registers and validates
    {"count":1}."""
    schema = closed(properties={"id": {"type": "string"}, "count": {"type": "integer"}})
    # Counter has no ``id`` field: a decoder says where it goes (registration refuses
    # a property the default decoder would drop).
    definition = Catalog().register(
        counter_definition(input_schema=schema, state_decoder=lambda d: Counter(count=d["count"]))
    )
    assert definition.validate_input('{"count":1}').value.count == 1


@pytest.mark.parametrize("raw", ["}", '{"count":[1}'])
def test_checklist_12_malformed_containers(raw: str) -> None:
    """§12.12 `}` and `{"count":[1}` fail validation cleanly with the invalid-input kind."""
    definition = Catalog().register(counter_definition())
    assert "unbalanced JSON" in str(input_refused(definition, raw))


# -- registration semantics --------------------------------------------------------------


def test_register_refuses_non_definitions() -> None:
    """§2 None → InvalidSchemaError('definition', nil definition); so does an object that
    is not a definition."""
    catalog = Catalog()
    with pytest.raises(InvalidSchemaError, match="nil definition") as caught:
        catalog.register(None)  # type: ignore[arg-type]
    assert caught.value.field == "definition"
    with pytest.raises(InvalidSchemaError) as caught:
        catalog.register("counter")  # type: ignore[arg-type]
    assert caught.value.field == "definition"
    assert len(catalog) == 0


async def test_register_stores_the_registered_copy() -> None:
    """§2 register returns the registered copy (not the argument), resolve returns that
    same copy, and the original stays unusable."""
    original = counter_definition()
    catalog = Catalog()
    registered = catalog.register(original)
    assert registered is not original
    assert catalog.resolve("counter", "v1") is registered
    input_refused(original, '{"count":1}')
    token = registered.validate_input('{"count":1}')
    with pytest.raises(InvalidInputError):
        await original.start(token, graph_run_id=RUN_ID)


async def test_two_catalogs_make_two_registrations() -> None:
    """§2 one definition registered in two catalogs: tokens of one are refused by the
    other."""
    original = counter_definition()
    first = Catalog().register(original)
    second = Catalog().register(original)
    for a, b in ((first, second), (second, first)):
        with pytest.raises(InvalidInputError, match="does not belong"):
            await b.start(a.validate_input('{"count":1}'), graph_run_id=RUN_ID)


def test_catalog_uses_the_copy_metadata() -> None:
    """§2 the key is taken from the registered copy's metadata."""

    class Renaming:
        """A definition whose registered copy is another definition."""

        def __init__(self, target: Definition) -> None:
            self.target = target

        def __getattr__(self, name: str) -> Any:
            return getattr(self.target, name)

        def metadata(self) -> Metadata:
            return counter_definition(name="before").metadata()

        def validate_input(self, raw: bytes | str) -> Any: ...
        def validate_resume(self, raw: bytes | str) -> Any: ...
        async def start(self, token: Any, **kwargs: Any) -> Any: ...
        async def resume(self, graph_run_id: str, token: Any, **kwargs: Any) -> Any: ...
        async def adopt(self, graph_run_id: str, **kwargs: Any) -> Any: ...
        async def get(self, graph_run_id: str) -> Any: ...
        async def history(self, graph_run_id: str) -> Any: ...
        async def checkpoint_history(self, graph_run_id: str) -> Any: ...
        async def checkpoint_page(self, graph_run_id: str, *, after: int, limit: int) -> Any: ...
        async def cancel(self, graph_run_id: str, reason: str) -> None: ...

        def registered_copy(self) -> Definition:
            return self.target.registered_copy()

    catalog = Catalog()
    stub = Renaming(counter_definition(name="after"))
    assert isinstance(stub, Definition)
    catalog.register(stub)
    assert ("after", "v1") in catalog and ("before", "v1") not in catalog


def test_contains_and_len() -> None:
    """§2 membership is by (name, version); other keys are never members."""
    catalog = Catalog()
    assert len(catalog) == 0 and ("counter", "v1") not in catalog
    catalog.register(counter_definition())
    assert len(catalog) == 1
    assert ("counter", "v1") in catalog
    assert ("counter", "v2") not in catalog
    assert "counter" not in catalog
    assert ["counter", "v1"] not in catalog
    assert ("counter", "v1", "x") not in catalog


def test_concurrent_registration_has_one_winner() -> None:
    """§2 the catalog is thread-safe: of 16 threads registering the same key at once,
    exactly one succeeds and the rest get DuplicateDefinitionError."""
    catalog = Catalog()
    definitions = [counter_definition() for _ in range(16)]
    barrier = threading.Barrier(len(definitions))
    outcomes: list[str] = []
    lock = threading.Lock()

    def register(definition: Definition) -> None:
        barrier.wait()
        try:
            catalog.register(definition)
            outcome = "ok"
        except DuplicateDefinitionError:
            outcome = "duplicate"
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=register, args=(d,)) for d in definitions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["duplicate"] * 15 + ["ok"]
    assert len(catalog) == 1


def test_registered_copies_share_the_runner() -> None:
    """§2 the copy is shallow: it drives the same runner (and so the same store)."""
    runner: flow.Runner[Any] = counter_runner()
    definition = TypedDefinition(counter_definition().metadata(), runner)
    registered = Catalog().register(definition)
    assert isinstance(registered, TypedDefinition) and registered.runner is runner
