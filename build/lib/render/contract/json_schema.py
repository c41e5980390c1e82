"""`vision_response_schema`: a caller's JSON Schema (2020-12), checked whole when the request arrives so that
checking an answer against it later can never fetch, loop or backtrack.

- **No fetch.** References resolve only inside the schema itself (its `$defs`, its embedded `$id`
  resources): the validator's registry has no retrieval, so `$ref`, `$dynamicRef` and `$id`-relative
  references to anything else never reach the network. A reference that does not resolve is refused when
  the request arrives.
- **No loop.** Nesting at most MAX_DEPTH levels and MAX_NODES schemas; no cycle of references that applies to
  the same value without descending into it (`{"$ref": "#"}`, two `$defs` naming each other): such a schema
  would recurse for ever. A reference inside `properties` or `items` descends, so recursive trees are fine.
- **No backtracking.** `pattern` and `patternProperties` are matched by RE2, in time linear in the answer,
  so `^(a+)+$` costs nothing; a pattern RE2 cannot compile (back-references, look-around) is refused.
  `unevaluatedProperties` beside `patternProperties` is refused (its matching is not RE2's).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any
from urllib.parse import urldefrag, urljoin

MAX_DEPTH = 32  # nested schemas, root included
MAX_NODES = 2000  # schemas (objects and booleans) in all
# Keywords whose subschemas apply to the same value (no descent into it): a cycle through these never ends.
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAP = ("dependentSchemas",)
# Keywords whose subschemas apply to parts of the value.
_DESCENT_ONE = ("additionalProperties", "unevaluatedProperties", "items", "contains", "propertyNames",
                "unevaluatedItems")
_DESCENT_MANY = ("prefixItems",)
_DESCENT_MAP = ("properties", "patternProperties", "$defs", "definitions")


class SchemaProblem(ValueError):
    """Why a schema cannot be used, in words for the caller (`vision_response_schema: ...`)."""


def _re2_options() -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False  # a refused pattern is the caller's error, not a line in the worker's log
    return options


@cache
def _compiled(pattern: str) -> Any:
    import re2

    return re2.compile(pattern, _re2_options())


def _pattern_problem(pattern: str) -> str | None:
    import re2

    try:
        _compiled(pattern)
    except re2.error as error:
        reason = error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else str(error)
        return f"the pattern {pattern[:60]!r} is not one RE2 matches ({reason}; back-references and " \
               "look-around are not supported)"
    return None


def _subschemas(node: dict[str, Any]) -> Iterator[tuple[str, Any, bool]]:
    """(keyword, subschema, in place) of a schema object's direct subschemas."""
    for keyword in _IN_PLACE_ONE + _DESCENT_ONE:
        if keyword in node:
            yield keyword, node[keyword], keyword in _IN_PLACE_ONE
    for keyword in _IN_PLACE_MANY + _DESCENT_MANY:
        if isinstance(node.get(keyword), list):
            for item in node[keyword]:
                yield keyword, item, keyword in _IN_PLACE_MANY
    for keyword in _IN_PLACE_MAP + _DESCENT_MAP:
        if isinstance(node.get(keyword), dict):
            for item in node[keyword].values():
                yield keyword, item, keyword in _IN_PLACE_MAP


def check(schema: dict[str, Any]) -> None:
    """Raise SchemaProblem unless `schema` is a JSON Schema (2020-12) that is safe to check answers against."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    from referencing.exceptions import Unresolvable

    nodes = _walk(schema)  # depth and size first: the metaschema check itself recurses
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        raise SchemaProblem(f"is not a valid JSON Schema: {error.message[:200]}") from None
    resolver = validator(schema)._resolver
    targets: dict[int, Any] = {}  # a reference's node -> the node it names
    for node, base in nodes:
        if not isinstance(node, dict):
            continue
        for keyword in ("$ref", "$dynamicRef"):
            if not isinstance(node.get(keyword), str):
                continue
            try:
                targets[id(node)] = resolver.lookup(urljoin(base, node[keyword])).contents
            except Unresolvable:
                raise SchemaProblem(f"the reference {node[keyword][:80]!r} does not resolve inside the schema "
                                    "(only its own $defs and $id resources are used; nothing is fetched)") from None
        for pattern in ([node["pattern"]] if isinstance(node.get("pattern"), str) else []) + list(
                node.get("patternProperties", {}) if isinstance(node.get("patternProperties"), dict) else []):
            problem = _pattern_problem(pattern)
            if problem:
                raise SchemaProblem(problem)
    if any(isinstance(node, dict) and "patternProperties" in node for node, _ in nodes) and any(
            isinstance(node, dict) and "unevaluatedProperties" in node for node, _ in nodes):
        raise SchemaProblem("unevaluatedProperties cannot be used with patternProperties")
    _refuse_cycles(nodes, targets)


def _walk(schema: dict[str, Any]) -> list[tuple[Any, str]]:
    """Every schema in `schema` with its base URI, depth first; SchemaProblem past MAX_DEPTH or MAX_NODES."""
    found: list[tuple[Any, str]] = []
    stack: list[tuple[Any, str, int]] = [(schema, "", 1)]
    while stack:
        node, base, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise SchemaProblem(f"nests deeper than {MAX_DEPTH} levels")
        if len(found) >= MAX_NODES:
            raise SchemaProblem(f"holds more than {MAX_NODES} schemas")
        if isinstance(node, dict) and isinstance(node.get("$id"), str):
            base = urldefrag(urljoin(base, node["$id"])).url
        found.append((node, base))
        if isinstance(node, dict):
            stack.extend((item, base, depth + 1) for _, item, _ in _subschemas(node))
    return found


def _refuse_cycles(nodes: list[tuple[Any, str]], targets: dict[int, Any]) -> None:
    """SchemaProblem when references and in-place keywords lead from a schema back to itself for the same value."""
    edges: dict[int, list[Any]] = {}
    for node, _ in nodes:
        if isinstance(node, dict):
            onward = [item for _, item, in_place in _subschemas(node) if in_place and isinstance(item, dict)]
            if id(node) in targets and isinstance(targets[id(node)], dict):
                onward.append(targets[id(node)])
            edges[id(node)] = onward
    state: dict[int, int] = {}  # 1: on the path being followed, 2: done
    for start, _ in nodes:
        if not isinstance(start, dict) or id(start) in state:
            continue
        path: list[tuple[Any, Iterator[Any]]] = [(start, iter(edges.get(id(start), [])))]
        state[id(start)] = 1
        while path:
            node, following = path[-1]
            step = next(following, None)
            if step is None:
                state[id(node)] = 2
                path.pop()
            elif state.get(id(step)) == 1:
                raise SchemaProblem("refers to itself without descending into the value (a $ref cycle such as "
                                    '{"$ref": "#"}): checking an answer against it would never end')
            elif id(step) not in state:
                state[id(step)] = 1
                path.append((step, iter(edges.get(id(step), []))))


def validator(schema: dict[str, Any]) -> Any:
    """A Draft 2020-12 validator of `schema` that never fetches a reference and matches patterns with RE2."""
    from referencing import Registry

    return _validator_class()(schema, registry=Registry())


@cache
def _validator_class() -> Any:
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import ValidationError

    def pattern(checker: Any, value: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
        if checker.is_type(instance, "string") and not _compiled(value).search(instance):
            yield ValidationError(f"{instance[:80]!r} does not match {value!r}")

    def pattern_properties(checker: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
                           ) -> Iterator[ValidationError]:
        if not checker.is_type(instance, "object"):
            return
        for expression, subschema in patterns.items():
            for key, value in instance.items():
                if _compiled(expression).search(key):
                    yield from checker.descend(value, subschema, path=key, schema_path=expression)

    def additional_properties(checker: Any, additional: Any, instance: Any, schema: dict[str, Any]
                              ) -> Iterator[ValidationError]:
        if not checker.is_type(instance, "object"):
            return
        named, patterns = schema.get("properties", {}), list(schema.get("patternProperties", {}))
        extras = [key for key in instance
                  if key not in named and not any(_compiled(expression).search(key) for expression in patterns)]
        if checker.is_type(additional, "object"):
            for extra in extras:
                yield from checker.descend(instance[extra], additional, path=extra)
        elif additional is False and extras:
            yield ValidationError(f"additional properties are not allowed ({', '.join(map(repr, sorted(extras)))})")

    return validators.extend(Draft202012Validator, {
        "pattern": pattern, "patternProperties": pattern_properties, "additionalProperties": additional_properties})
