"""The documentation: the generated references are current, every link between the documents leads somewhere,
and the README stays a front page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.servers import ROOT

DOCUMENTS = sorted([ROOT / "README.md", ROOT / "bench" / "README.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub and most renderers make it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors, fence = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            anchors.add(_slug(line.lstrip("#")))
    return anchors


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_leads_to_a_file_and_heading_that_exist(document: Path) -> None:
    broken = []
    for target in _links(document):
        file, _, anchor = target.partition("#")
        linked = (document.parent / file).resolve() if file else document
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(target)
    assert broken == []


def test_every_document_in_docs_is_linked_from_the_readme() -> None:
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in _links(ROOT / "README.md")}
    assert {path.resolve() for path in (ROOT / "docs").glob("*.md")} <= linked


def test_the_readme_is_a_front_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    assert "make run" in readme and "make test" in readme


def test_settings_reference_is_current() -> None:
    from service.settings import reference

    assert (ROOT / "docs" / "settings.md").read_text() == reference(), "run `make docs`"


def test_the_settings_reference_names_every_setting_the_code_reads() -> None:
    from render.settings import RenderSettings
    from service.settings import ServiceSettings
    from storage.settings import StorageSettings

    table = (ROOT / "docs" / "settings.md").read_text()
    documented = set(re.findall(r"^\| (SCREENSHOT_[A-Z0-9_]+) \|", table, flags=re.MULTILINE))
    in_code = {f"SCREENSHOT_{name.upper()}" for cls in (ServiceSettings, RenderSettings, StorageSettings)
               for name in cls.model_fields}
    assert documented == in_code
    assert all(cls.model_fields[name].description for cls in (ServiceSettings, RenderSettings, StorageSettings)
               for name in cls.model_fields)


def test_parameter_reference_is_current() -> None:
    from render.contract.reference import parameters_markdown

    assert (ROOT / "docs" / "parameters.md").read_text() == parameters_markdown(), "run `make docs`"


def test_animate_reference_is_current() -> None:
    from animate.reference import animate_markdown

    assert (ROOT / "docs" / "animate.md").read_text() == animate_markdown(), "run `make docs`"


def test_the_signing_example_is_what_the_server_computes() -> None:
    from service.signatures import canonical_message, sign

    guide = (ROOT / "docs" / "using.md").read_text()
    example = guide.split("A worked example", 1)[1].split("## Playground", 1)[0]
    message = re.search(r"```text\n(.+?)\n```", example, flags=re.DOTALL).group(1)  # type: ignore[union-attr]
    signature = re.search(r"the signature `([0-9a-f]{64})`", example).group(1)  # type: ignore[union-attr]
    pairs = [("url", "https://example.com/a page?x=1"), ("format", "webp"), ("hide_selectors", ".ad"),
             ("hide_selectors", "#cookie"), ("access_key", "demo-access")]
    assert canonical_message(pairs) == message
    assert sign(message, "demo-signing-key") == signature


def test_every_path_the_architecture_names_exists() -> None:
    """The table of features and the glossary point at files: a moved or renamed file fails here."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    paths = set(re.findall(r"`((?:render|service|animate|storage|deploy|tests|bench)/[\w/.-]*)`", text))
    assert len(paths) > 50
    assert sorted(path for path in paths if not (ROOT / path).exists()) == []
