"""The JSON schema of the capture routes' parameters (`/take`, `/animate`), typed from the one options model: the
API's OpenAPI document and the MCP server's tools both describe their parameters with it."""

from __future__ import annotations

import functools
from typing import Any

from animate.options import NOT_FOR_RECORDINGS, AnimateOptions
from render.contract.options import TakeOptions

# Field metadata the options model keeps for docs and the playground: OpenAPI extensions here.
_EXTENSIONS = {"group": "x-group", "shown_default": "x-shown-default"}


def _renamed(schema: Any) -> Any:
    """The schema with the model's own annotations under x- names (generators warn on unknown keys)."""
    if isinstance(schema, dict):
        return {_EXTENSIONS.get(key, key): _renamed(value) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_renamed(item) for item in schema]
    return schema


# What describes a property rather than constrains its value: kept outside the anyOf `_nullable` makes.
_ANNOTATIONS = ("title", "description", "default", "writeOnly", "deprecated", "examples", *_EXTENSIONS.values())


def _nullable(prop: dict[str, Any]) -> dict[str, Any]:
    """`prop` admitting a JSON null too: in a body, null is the same as leaving the parameter out (docs/using.md,
    Parameters), so a generated client may send one and the server accepts it (service/api/body_schema.py
    holds bodies to this document)."""
    if any(option.get("type") == "null" for option in prop.get("anyOf", ())):
        return prop
    value = {key: item for key, item in prop.items() if key not in _ANNOTATIONS}
    return {**{key: item for key, item in prop.items() if key in _ANNOTATIONS},
            "anyOf": [value, {"type": "null"}]}


def _state_shown_default(prop: dict[str, Any]) -> None:
    """A default that depends on other parameters (`None` in the model: 1280 x 1024 at scale 1 unless a
    viewport_device preset sets them) written into the description, where client generators show it."""
    shown = prop.get("x-shown-default")
    if shown is None:
        return
    preset = ", unless viewport_device sets it" if prop.get("x-group") == "Viewport" else ""
    prop["description"] = f"{prop.get('description', '').rstrip()} Default: {shown}{preset}.".lstrip()


@functools.cache
def options_schema(kind: str) -> dict[str, Any]:
    """The JSON schema of a capture route's parameters (`take` or `animate`), refused ones left out,
    with the credentials a POST body may carry."""
    model = AnimateOptions if kind == "animate" else TakeOptions
    schema = _renamed(model.model_json_schema(by_alias=True))
    if kind == "animate":
        schema["properties"] = {name: value for name, value in schema["properties"].items()
                                if name not in NOT_FOR_RECORDINGS}
    for prop in schema["properties"].values():
        _state_shown_default(prop)
    schema["properties"]["access_key"] = {
        "type": "string", "writeOnly": True,
        "description": "The organisation's access key (or the X-Access-Key header, or ?access_key=)."}
    schema["properties"]["signature"] = {
        "type": "string", "description": "Hex HMAC-SHA256 of the request, keyed with the signing key "
        "(required when the organisation requires signed requests)."}
    schema["properties"] = {name: _nullable(prop) for name, prop in schema["properties"].items()}
    return schema
