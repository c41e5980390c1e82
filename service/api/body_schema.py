"""JSON bodies held to the API's own OpenAPI document: a value the document types otherwise is refused.

The options model parses leniently, because a query string is text ("true", "1", "1280"); a JSON body has
types of its own, and a generated client and the server must agree on them: `"block_ads": 0`,
`"viewport_width": false` or `"access_key": [null]` in a body are refused (request_not_valid, naming the field).
A JSON null is accepted wherever the document says so (every capture parameter: null is the same as leaving
it out). `/bulk` is held to the whole of its schema (ranges, choices, unknown fields too): what is left to
each entry's own answer is only what the schema cannot say (docs/using.md, Bulk). The messages are built from the
schema, never from the value sent, which may be a secret.

A body is first read by jsonschema-rs (compiled, in Rust): one that passes every rule of the schema, as nearly every
client's does, is let through at once, far faster than jsonschema reads it. Any other is read again by jsonschema, whose
errors the messages are made of and which decides: a body may break a rule without being refused, when only its types
are held to the schema.

That second reading is bounded, since it runs before the caller is known and on the API's event loop, where a hostile
body read whole would hold every organisation's requests for seconds: jsonschema goes down only into the values
jsonschema-rs finds wrong (a property, an item, a run of items read at once), never into the entries of a list longer
than its maxItems (that rule answers for them), reads at most MOST_ERRORS errors of each alternative, and stops after
MOST_DETAILS details or MOST_ERRORS errors in all (tens of ms). A body left with rule errors unnamed there (held to its
types only) is refused by the options' own validation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError

from render.contract import json_text
from render.contract.errors import MOST_DETAILS, ErrorDetail, RequestNotValid

_TYPE_NAMES = {"boolean": "a boolean (true or false)", "integer": "an integer", "number": "a number",
               "string": "a string", "array": "an array", "object": "an object", "null": "null"}
_MOST_CHOICES_NAMED = 12
MOST_ERRORS = 400  # schema errors read at most for them
_RUN = 512  # items jsonschema-rs reads at once, looking for the wrong ones of a list
_TYPES = Draft202012Validator({})
# Per (document, component): the document, its jsonschema-rs validator and the jsonschema one that words errors.
_VALIDATORS: dict[tuple[int, str], tuple[dict[str, Any], Any, Draft202012Validator]] = {}


def check(document: dict[str, Any], component: str, raw: bytes, *, whole: bool = False) -> None:
    """Refuse the body `raw` (a JSON object: service.params.parse_body read it first) where it breaks component
    `component` of `document`: its JSON types only, or with `whole` every rule of the schema. The body is read
    here again as plain JSON, its numbers numbers (parse_body keeps their text, for signatures)."""
    # Empty: as parse_body.
    plain = json.loads(raw, object_hook=_Quiet, parse_int=json_text.integer) if raw.strip() else {}
    fast, wording = _validators(component, document)
    if fast.is_valid(plain):
        return
    found: dict[ErrorDetail, None] = {}
    for count, error in enumerate(wording.iter_errors(plain), start=1):
        for detail in _details(error, whole):
            found[detail] = None
            if len(found) == MOST_DETAILS:
                break
        if len(found) == MOST_DETAILS or count == MOST_ERRORS:
            break
    if found:
        unique = list(found)
        raise RequestNotValid("The body does not match the API's schema: " + "; ".join(
            f"{detail.field} {detail.message}" for detail in unique[:5]) + ("." if len(unique) <= 5 else "; ..."),
            unique)


def _validators(component: str, document: dict[str, Any]) -> tuple[Any, Draft202012Validator]:
    """The jsonschema-rs validator of `component` and the jsonschema one that words its errors, made once per
    document (built once per app and cached on it)."""
    key = (id(document), component)
    held = _VALIDATORS.get(key)
    if held is None or held[0] is not document:
        schema = {"$ref": f"#/components/schemas/{component}", "components": document["components"]}
        held = _VALIDATORS[key] = (document, jsonschema_rs.validator_for(schema),
                                   _wording(schema, _Compiled(document["components"])))
    return held[1], held[2]


class _Compiled:
    """jsonschema-rs validators of the parts of a document's schemas, each compiled when first asked for: which
    values of a body keep their part's rules, so that jsonschema reads only the others."""

    def __init__(self, components: dict[str, Any]) -> None:
        self._components = components
        self._held: dict[tuple[str, int], tuple[Any, Any]] = {}  # the part is held, so its id stays its own

    def _validator(self, kind: str, part: Any) -> Any:
        held = self._held.get((kind, id(part)))
        if held is None:
            schema = {"allOf": [part]} if kind == "one" else {"items": part}
            held = self._held[(kind, id(part))] = (part, jsonschema_rs.validator_for(
                {**schema, "components": self._components}))
        return held[1]

    def keeps(self, part: Any, value: Any) -> bool:
        return self._validator("one", part).is_valid(value)

    def wrong_items(self, part: Any, items: list[Any], start: int) -> Iterator[int]:
        """The indexes from `start` of the items that break `part`, in order: a run of items is read at once, and
        one by one only where the run breaks it."""
        every = self._validator("every", part)
        for run in range(start, len(items), _RUN):
            if not every.is_valid(items[run:run + _RUN]):
                yield from (index for index in range(run, min(run + _RUN, len(items)))
                            if not self.keeps(part, items[index]))


def _wording(schema: dict[str, Any], compiled: _Compiled) -> Draft202012Validator:
    """A jsonschema validator of `schema` whose `properties` and `items` go down only into the values that break
    their part (jsonschema-rs says which), not into the entries of a list longer than its maxItems, and whose
    `anyOf` reads at most MOST_ERRORS errors of each alternative (jsonschema's reads all of them, at once): the
    errors it finds are those jsonschema finds, in the same order, less those of values that break nothing."""

    def properties(validator: Any, parts: dict[str, Any], instance: Any, schema: dict[str, Any]
                   ) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        for name, part in parts.items():
            if name in instance and not compiled.keeps(part, instance[name]):
                yield from validator.descend(instance[name], part, path=name, schema_path=name)

    def items(validator: Any, part: Any, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "array"):
            return
        if isinstance(schema.get("maxItems"), int) and len(instance) > schema["maxItems"]:
            return  # refused whole, by maxItems
        start = len(schema.get("prefixItems", []))
        for index in compiled.wrong_items(part, instance, start):
            yield from validator.descend(instance[index], part, path=index)

    def any_of(validator: Any, branches: list[Any], instance: Any, schema: dict[str, Any]
               ) -> Iterator[ValidationError]:
        if any(compiled.keeps(branch, instance) for branch in branches):
            return
        context = [error for index, branch in enumerate(branches)
                   for error in islice(validator.descend(instance, branch, schema_path=index), MOST_ERRORS)]
        yield ValidationError("is not valid under any of the given schemas", context=context)

    bounded = validators.extend(Draft202012Validator, {"properties": properties, "items": items, "anyOf": any_of})
    return bounded(schema)


class _Quiet(dict):
    """A JSON object of the body that jsonschema's messages (which quote the values they speak of, and which these
    answers never use) do not spell out: a long list of them is costly to quote whole."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "{...}"


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
    elif keyword == "maxItems":  # held to its types only or not, a list longer than it may be is refused here
        yield ErrorDetail(field, _rule(keyword, rule))
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
    if not any(_TYPES.is_type(error.instance, kind) for branch in branches for kind in _branch_types(branch)):
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
