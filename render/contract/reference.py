"""The `/take` parameter reference in Markdown, generated from the options model (docs/parameters.md)."""

from __future__ import annotations

from typing import Any

from render.contract.devices import DEVICES
from render.contract.options import TakeOptions
from render.contract.validation import SDK_ALIASES


def _type(schema: dict[str, Any]) -> str:
    options = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    schema = options[0] if options else schema
    if "enum" in schema:
        values = schema["enum"]
        if len(values) > 20:
            return "device id (below)"
        return " \\| ".join(f"`{v}`" for v in values)
    if schema.get("type") == "array":
        return f"list of {_type(schema.get('items', {}))}"
    kind = {"integer": "integer", "number": "number", "boolean": "boolean", "string": "string"}.get(
        schema.get("type", ""), "string")
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        return f"{kind}, {low} to {high}"
    if low is not None:
        return f"{kind}, at least {low}"
    if high is not None:
        return f"{kind}, at most {high}"
    return kind


def _default(value: Any) -> str:
    if value is None or value == []:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(f"`{v}`" for v in value)
    return f"`{value}`"


def parameter_tables(model: type[TakeOptions], names: list[str] | None = None) -> dict[str, list[str]]:
    """Markdown table rows of `model`'s parameters (all, or `names`), by group."""
    properties = model.model_json_schema(by_alias=True)["properties"]
    groups: dict[str, list[str]] = {}
    for name, field in model.model_fields.items():
        if names is not None and name not in names:
            continue
        alias = field.alias or name
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        group = str(extra.get("group", "Other"))
        description = (field.description or "").replace("|", "\\|")
        shown = extra.get("shown_default")
        default = str(shown) if shown is not None else _default(field.default)
        groups.setdefault(group, []).append(
            f"| `{alias}` | {_type(properties[alias])} | {default} | {description} |")
    return groups


def parameters_markdown() -> str:
    """Every /take parameter, grouped as in the spec, with type, default and what it does."""
    groups = parameter_tables(TakeOptions)
    lines = [
        "# /take parameters",
        "",
        "Generated from `render/contract/options.py` by `make docs`; do not edit by hand. GET takes them in the query",
        "string (arrays as repeated keys), POST as a JSON body and/or the query string. `access_key` and",
        "`signature` are the credentials (docs/using.md). `/docs` on a running service shows the same.",
        "",
        "Other names taken, as the hosted API's official SDKs send them: "
        + ", ".join(f"`{alias}` for `{name}`" for alias, name in SDK_ALIASES.items()) + ".",
        "",
    ]
    for group, rows in groups.items():
        lines += [f"## {group}", "", "| parameter | type | default | what it does |", "|---|---|---|---|", *rows, ""]
    lines += ["## Device presets (`viewport_device`)", "", "| id | width x height | scale | mobile | touch |",
              "|---|---|---|---|---|"]
    for device_id, device in sorted(DEVICES.items()):
        lines.append(f"| `{device_id}` | {device.width} x {device.height} | {device.scale:g} | "
                     f"{'yes' if device.mobile else 'no'} | {'yes' if device.touch else 'no'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(parameters_markdown(), end="")  # noqa: T201
