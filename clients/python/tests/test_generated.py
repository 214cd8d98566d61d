"""The generated models and operations resolve as Python reads them, and match the OpenAPI document.

The freshness of the files against the document is tested by the repository's vitest suite
(test/python-client-generated.test.ts); here, that what was generated is valid Python whose type
annotations all name something, with one method per operation of the document. No emulator needed.
"""

from __future__ import annotations

import inspect
import json
import typing
from pathlib import Path

from audience_client import PROBLEMS, models
from audience_client.operations import Operations

DOCUMENT = Path(__file__).resolve().parents[2] / "typescript" / "openapi.json"


def test_every_model_annotation_names_a_type():
    typed_dicts = [
        value
        for value in vars(models).values()
        if isinstance(value, type) and issubclass(value, dict) and value.__module__ == models.__name__
    ]
    assert len(typed_dicts) > 50
    for model in typed_dicts:
        hints = typing.get_type_hints(model, include_extras=True)
        assert set(hints) == set(model.__annotations__), model.__name__
        assert model.__required_keys__ | model.__optional_keys__ == set(hints)


def test_one_method_per_operation_of_the_document_whose_annotations_resolve():
    document = json.loads(DOCUMENT.read_text())
    operations = [
        f"``{method.upper()} {route}``"
        for route, item in document["paths"].items()
        for method, operation in item.items()
        if isinstance(operation, dict) and "responses" in operation
    ]
    methods = [f for name, f in inspect.getmembers(Operations, inspect.isfunction) if not name.startswith("_")]
    assert len(methods) == len(operations)
    # Each method's docstring names its method and route: each operation is named by one method.
    named = sorted(next(line.strip() for line in f.__doc__.splitlines() if line.strip().startswith("``")) for f in methods)
    assert named == sorted(operations)
    for function in methods:
        typing.get_type_hints(function)
        assert function.__name__ == function.__name__.lower()


def test_the_problem_codes_are_those_of_the_error_tables():
    # Every code the error tables name is one of ProblemCode (the document's own union, where it has one).
    assert set(PROBLEMS) <= set(typing.get_args(models.ProblemCode))
    assert PROBLEMS["AUD-1009"] == (401, "Invalid client credentials")
