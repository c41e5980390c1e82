"""JSON bodies held to the API's own OpenAPI document: a value the document types otherwise is refused.

The options model parses leniently, because a query string is text ("true", "1", "1280"); a JSON body has
types of its own, and a generated client and the server must agree on them: `"block_ads": 0`,
`"viewport_width": false` or `"access_key": [null]` in a body are refused (request_not_valid, naming the field).
A JSON null is accepted wherever the document says so (every capture parameter: null is the same as leaving
it out). `/bulk` is held to the whole of its schema (ranges, choices, unknown fields too): what is left to
each entry's own answer is only what the schema cannot say (README, Bulk). The messages are built from the
schema, never from the value sent, which may be a secret.

A body is first read by jsonschema-rs (compiled, in Rust): one that passes every rule of the schema, as nearly
every client's does, is let through at once (a bulk body of 10 entries took 1.4 ms with jsonschema alone here,
0.06 ms so). Any other is read again by jsonschema, whose errors the messages are made of and which decides: a
body may break a rule without being refused, when only its types are held to the schema.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from render.contract.errors import ErrorDetail, RequestNotValid
from service.params import JsonNumber

_TYPE_NAMES = {"boolean": "a boolean (true or false)", "integer": "an integer", "number": "a number",
               "string": "a string", "array": "an array", "object": "an object", "null": "null"}
_MOST_CHOICES_NAMED = 12
# Per (document, component): the document, its jsonschema-rs validator and its jsonschema one.
_VALIDATORS: dict[tuple[int, str], tuple[dict[str, Any], Any, Draft202012Validator]] = {}


def check(document: dict[str, Any], component: str, body: dict[str, Any], *, whole: bool = False) -> None:
    """Refuse `body` (parsed by service.params.parse_body) where it breaks component `component` of `document`:
    its JSON types only, or with `whole` every rule of the schema."""
    plain = _plain(body)
    fast, full = _validators(component, document)
    if fast.is_valid(plain):
        return
    found = [detail for error in full.iter_errors(plain) for detail in _details(error, whole)]
    if found:
        unique = list(dict.fromkeys(found))
        raise RequestNotValid("The body does not match the API's schema: " + "; ".join(
            f"{detail.field} {detail.message}" for detail in unique[:5]) + ("." if len(unique) <= 5 else "; ..."),
            unique)


def _validators(component: str, document: dict[str, Any]) -> tuple[Any, Draft202012Validator]:
    """The jsonschema-rs and jsonschema validators of `component`, made once per document (built once per app and
    cached on it)."""
    key = (id(document), component)
    held = _VALIDATORS.get(key)
    if held is None or held[0] is not document:
        schema = {"$ref": f"#/components/schemas/{component}", "components": document["components"]}
        held = _VALIDATORS[key] = (document, jsonschema_rs.validator_for(schema), Draft202012Validator(schema))
    return held[1], held[2]


def _plain(value: Any) -> Any:
    """The body with its numbers as numbers (parse_body keeps their text for signatures)."""
    if isinstance(value, JsonNumber):
        text = str.__str__(value)
        return int(text) if text.lstrip("-").isdigit() else float(text)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _field(path: Iterable[Any]) -> str:
    """`requests.1.viewport_width`: the way the bulk route names an entry's fields."""
    return ".".join(str(part) for part in path) or "body"


def _details(error: ValidationError, whole: bool) -> Iterator[ErrorDetail]:
    field = _field(error.absolute_path)
    keyword, rule = error.validator, error.validator_value
    if keyword in ("anyOf", "oneOf"):
        yield from _alternatives(error, whole)
    elif keyword == "type":
        yield ErrorDetail(field, "must be " + _types(rule))
    elif not whole:
        return
    elif keyword == "required":
        for name in rule:
            if isinstance(error.instance, dict) and name not in error.instance:
                yield ErrorDetail(_field([*error.absolute_path, name]), "is required")
    elif keyword in ("additionalProperties", "unevaluatedProperties") and isinstance(error.instance, dict):
        known = error.schema.get("properties", {})
        for name in error.instance:
            if name not in known:
                yield ErrorDetail(_field([*error.absolute_path, name]), "is not a parameter of this route")
    else:
        yield ErrorDetail(field, _rule(keyword, rule))


def _alternatives(error: ValidationError, whole: bool) -> Iterator[ErrorDetail]:
    """A value matching none of a property's alternatives (a type, or null): with none of its type, the types
    it may have; else what is wrong inside the alternatives of its type."""
    branches = [branch for branch in error.validator_value if isinstance(branch, dict)]
    checker = Draft202012Validator({})
    if not any(checker.is_type(error.instance, kind) for branch in branches for kind in _branch_types(branch)):
        yield ErrorDetail(_field(error.absolute_path), "must be " + _types(
            [kind for branch in branches for kind in _branch_types(branch)]))
        return
    said = False
    for sub in error.context or ():
        if sub.validator == "type" and not sub.relative_path:
            continue  # an alternative of another type
        for detail in _details(sub, whole):
            said = True
            yield detail
    if whole and not said:
        yield ErrorDetail(_field(error.absolute_path), "matches none of the forms the schema allows")


def _branch_types(branch: dict[str, Any]) -> list[str]:
    kind = branch.get("type")
    if kind is None and "$ref" in branch:
        return ["object"]
    return [kind] if isinstance(kind, str) else list(kind or [])


def _types(rule: Any) -> str:
    kinds = [rule] if isinstance(rule, str) else list(dict.fromkeys(rule))
    return " or ".join(_TYPE_NAMES.get(kind, kind) for kind in kinds)


def _rule(keyword: str, rule: Any) -> str:
    if keyword == "enum":
        named = ", ".join(str(choice) for choice in rule[:_MOST_CHOICES_NAMED])
        return f"must be one of {named}" + (", ... (see /docs)" if len(rule) > _MOST_CHOICES_NAMED else "")
    return {"minimum": f"must be at least {rule}", "maximum": f"must be at most {rule}",
            "exclusiveMinimum": f"must be above {rule}", "exclusiveMaximum": f"must be below {rule}",
            "minLength": f"must be at least {rule} characters", "maxLength": f"must be at most {rule} characters",
            "minItems": f"must have at least {rule} items", "maxItems": f"must have at most {rule} items",
            "const": f"must be {rule}", "pattern": f"must match the pattern {rule}",
            "uniqueItems": "must not repeat an item"}.get(keyword, f"breaks the schema's {keyword} rule")
