"""`docs/animate.md`: the parameters /animate adds to /take's (`make docs`)."""

from __future__ import annotations

from animate.options import NOT_FOR_RECORDINGS, AnimateOptions
from render.contract.options import TakeOptions
from render.contract.reference import parameter_tables


def animate_markdown() -> str:
    own = [name for name in AnimateOptions.model_fields if name not in TakeOptions.model_fields or name == "format"]
    lines = [
        "# /animate parameters",
        "",
        "Generated from `animate/options.py` by `make docs`; do not edit by hand. `/animate` takes every",
        "[/take parameter](parameters.md) that makes sense for a recording, plus these. Refused there (with",
        "`request_not_valid` naming them): " + ", ".join(f"`{n}`" for n in sorted(NOT_FOR_RECORDINGS)) + ".",
        "",
    ]
    for group, rows in parameter_tables(AnimateOptions, own).items():
        lines += [f"## {group}", "", "| parameter | type | default | what it does |", "|---|---|---|---|", *rows, ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(animate_markdown(), end="")  # noqa: T201
