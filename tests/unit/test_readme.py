"""The README's settings table documents exactly the settings the code reads."""

from __future__ import annotations

import re

from render.settings import RenderSettings
from service.settings import ServiceSettings
from storage.settings import StorageSettings
from tests.support.servers import ROOT


def test_settings_table_matches_the_settings_classes() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Settings", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| (SCREENSHOT_[A-Z0-9_]+) \|", table, flags=re.MULTILINE))
    in_code = {f"SCREENSHOT_{name.upper()}" for cls in (ServiceSettings, RenderSettings, StorageSettings)
               for name in cls.model_fields}
    assert documented == in_code


def test_parameter_reference_is_current() -> None:
    from render.contract.reference import parameters_markdown

    assert (ROOT / "docs" / "parameters.md").read_text() == parameters_markdown(), "run `make docs`"


def test_animate_reference_is_current() -> None:
    from animate.reference import animate_markdown

    assert (ROOT / "docs" / "animate.md").read_text() == animate_markdown(), "run `make docs`"


def test_the_signing_example_is_what_the_server_computes() -> None:
    from service.signatures import canonical_message, sign

    readme = (ROOT / "README.md").read_text()
    example = readme.split("A worked example", 1)[1].split("## Playground", 1)[0]
    message = re.search(r"```text\n(.+?)\n```", example, flags=re.DOTALL).group(1)  # type: ignore[union-attr]
    signature = re.search(r"the signature `([0-9a-f]{64})`", example).group(1)  # type: ignore[union-attr]
    pairs = [("url", "https://example.com/a page?x=1"), ("format", "webp"), ("hide_selectors", ".ad"),
             ("hide_selectors", "#cookie"), ("access_key", "demo-access")]
    assert canonical_message(pairs) == message
    assert sign(message, "demo-signing-key") == signature
