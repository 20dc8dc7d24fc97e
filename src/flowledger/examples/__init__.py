"""Built-in example workflows: the catalog a host serves when no application is named."""

from __future__ import annotations

from ..workflows import Catalog
from .review import Review, review_definition

__all__ = ["Review", "catalog", "review_definition"]


def catalog() -> Catalog:
    """A catalog of the built-in examples (unbound: a host binds it to its database)."""
    examples = Catalog()
    examples.register(review_definition())
    return examples
