"""Attribute docstrings of pydantic models (the string under a field), which pydantic leaves
out of their JSON Schemas: the reference pages show them as the fields' descriptions."""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
import typing
from typing import Any

from pydantic import BaseModel


def attribute_docs(model: type[BaseModel]) -> dict[str, str]:
    """``{field: docstring}`` of ``model`` and the models it inherits from."""
    docs: dict[str, str] = {}
    for klass in reversed(model.__mro__):
        if not (isinstance(klass, type) and issubclass(klass, BaseModel)) or klass is BaseModel:
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        node = ast.parse(source).body[0]
        body = node.body if isinstance(node, ast.ClassDef) else []
        for field, after in itertools.pairwise(body):
            if (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[field.target.id] = inspect.cleandoc(after.value.value)
    return docs


def models_under(root: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Every model reachable from ``root``'s fields (``root`` too), by class name: the names
    its JSON Schema's ``$defs`` use."""
    found: dict[str, type[BaseModel]] = {}

    def visit(annotation: Any) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation.__name__ in found:
                return
            found[annotation.__name__] = annotation
            for f in annotation.model_fields.values():
                visit(f.annotation)
        for arg in typing.get_args(annotation):
            visit(arg)

    visit(root)
    return found


def describe(schema: dict[str, Any], root: type[BaseModel]) -> dict[str, Any]:
    """``schema`` (of ``root``) with each property that has no description given its
    attribute docstring, at the top and in every ``$defs`` entry of a model."""
    models = models_under(root)
    for name, body in [(root.__name__, schema), *schema.get("$defs", {}).items()]:
        model = models.get(name)
        if model is None:
            continue
        docs = attribute_docs(model)
        for key, prop in body.get("properties", {}).items():
            if not prop.get("description") and key in docs:
                prop["description"] = docs[key]
    return schema
