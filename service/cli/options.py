"""Command-line options generated from an options model (`take`): every parameter with its help, default
and allowed values; booleans as bare flags (`--full-page`, or `--full-page false`), arrays by repeating the
flag (`--hide-selectors .a --hide-selectors .b`). Values stay strings: the model validates them as it
validates a query string, so the command line and the API refuse the same things the same way."""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import BaseModel

SOURCES = ("url", "html", "markdown")  # given as the command's SOURCE argument


def _variants(prop: dict[str, Any]) -> list[dict[str, Any]]:
    return [variant for variant in prop.get("anyOf", [prop]) if variant.get("type") != "null"]


def _help(prop: dict[str, Any], choices: list[str] | None) -> str:
    parts = [prop.get("description", "")]
    if choices:
        parts.append(f"One of: {', '.join(choices)}.")
    shown = prop.get("shown_default", prop.get("default"))
    if shown not in (None, [], ""):
        parts.append(f"Default: {str(shown).lower() if isinstance(shown, bool) else shown}.")
    return " ".join(part for part in parts if part).replace("%", "%%")  # argparse formats help with %


def add_model_options(parser: argparse.ArgumentParser, model: type[BaseModel], title: str) -> None:
    """One option per parameter of `model` (the sources excepted), in the model's groups' order."""
    properties = model.model_json_schema(by_alias=True)["properties"]
    groups: dict[str, argparse._ArgumentGroup] = {}
    for name, prop in properties.items():
        if name in SOURCES:
            continue
        group_name = prop.get("group", "Other")
        if group_name not in groups:
            groups[group_name] = parser.add_argument_group(f"{title}: {group_name.lower()}")
        variants = _variants(prop)
        kinds = {variant.get("type") for variant in variants}
        choices = next((variant["enum"] for variant in variants if "enum" in variant), None)
        flag = "--" + name.replace("_", "-")
        common: dict[str, Any] = {"dest": name, "default": argparse.SUPPRESS, "help": _help(prop, choices)}
        if kinds == {"boolean"}:
            groups[group_name].add_argument(flag, nargs="?", const="true", metavar="true|false", **common)
        elif kinds == {"array"}:
            groups[group_name].add_argument(flag, action="append", metavar="VALUE", **common)
        else:
            metavar = "{" + ",".join(map(str, choices)) + "}" if choices and len(choices) <= 6 else name.upper()
            groups[group_name].add_argument(flag, metavar=metavar, **common)


def chosen(args: argparse.Namespace, model: type[BaseModel]) -> dict[str, Any]:
    """The parameters given on the command line, by their API names."""
    names = {info.alias or name for name, info in model.model_fields.items()}
    return {name: value for name, value in vars(args).items() if name in names and name not in SOURCES}
