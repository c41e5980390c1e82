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
    return schema
