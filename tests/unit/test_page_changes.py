"""Page state by construction: a job changes its page only through the tab's operations, each records what it
leaves, and the wipe decides from the record. A new page feature that reaches the page another way, or sends a
DevTools command nobody has classified, fails here."""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from render.browser.page_changes import CDP_EFFECTS, PLAYWRIGHT_EFFECTS, Effect, UnknownCommand
from render.browser.tabs import Tab

ROOT = Path(__file__).resolve().parents[2]
TABS = ROOT / "render" / "browser" / "tabs.py"
# Playwright calls that leave state on a page or its context: only the tab makes them (its operations record them).
CHANGING_CALLS = {"add_init_script", "expose_binding", "expose_function", "route", "route_web_socket",
                  "emulate_media", "grant_permissions", "add_cookies", "set_extra_http_headers", "set_viewport_size",
                  "set_geolocation", "click", "hover", "dblclick", "tap", "set_offline"}
EVENTS = {"Fetch.requestPaused", "Page.screencastFrame"}  # listened to, never sent
TAB_RECEIVER = re.compile(r"(^|\.)_?(tab|kept)$")


def _sources() -> list[Path]:
    return [path for package in ("render", "animate") for path in sorted((ROOT / package).rglob("*.py"))]


def test_every_devtools_command_the_code_sends_is_classified() -> None:
    """A command's name written anywhere in the code says what it leaves on the page (CDP_EFFECTS)."""
    named = {name for path in _sources()
             for name in re.findall(r"""["']((?:Page|Emulation|Network|Runtime|DOM|CSS|Fetch|Storage|Input|Target|
             Browser|Security|Overlay|Animation|HeapProfiler|SystemInfo|Log|Performance|ServiceWorker|
             IndexedDB|CacheStorage|DOMStorage|Debugger|Accessibility)\.[a-z][A-Za-z]+)["']""".replace("\n", "")
                                    .replace(" ", ""), path.read_text())}
    assert len(named) >= 25
    assert sorted(named - set(CDP_EFFECTS) - EVENTS) == []


def _calls_outside_the_tab() -> list[str]:
    found = []
    for path in _sources():
        if path == TABS:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            receiver = ast.unparse(node.func.value)
            where = f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node.func)}"
            if node.func.attr == "send" and receiver.endswith("cdp"):
                found.append(where)  # the tab's session straight: Tab.send records
            elif node.func.attr in CHANGING_CALLS and not TAB_RECEIVER.search(receiver):
                found.append(where)
    return found


def test_no_page_operation_bypasses_the_tab() -> None:
    assert _calls_outside_the_tab() == []
    helpers_set = [f"{path.relative_to(ROOT)}" for path in _sources() if path != TABS
                   and re.search(r"\.helpers\[[^\]]+\]\s*=", path.read_text())]
    assert helpers_set == []  # a helper goes on through Tab.attach or Tab.add_helper


def test_a_listener_on_the_page_is_removed_by_its_module_or_kept_by_the_tab() -> None:
    """`page.on` leaves a listener for the page's lifetime: a module adding one removes it again, or asks the tab
    (`keep_listening`, which records it)."""
    leaving = []
    for path in _sources():
        if path == TABS:
            continue
        text = path.read_text()
        adds = re.findall(r"\b(?:page|_page)\.on\(", text)
        if adds and "remove_listener(" not in text:
            leaving.append(str(path.relative_to(ROOT)))
    assert leaving == []


class _Session:
    def __init__(self) -> None:
        self.sent: list[str] = []

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.sent.append(method)
        return {}


class _Context:
    async def grant_permissions(self, permissions: list[str]) -> None:
        pass


class _Page:
    async def add_init_script(self, script: str) -> None:
        pass


def _tab() -> tuple[Tab, _Session]:
    session = _Session()
    return Tab(_Context(), _Page(), session), session  # type: ignore[arg-type]


@pytest.mark.parametrize("method", sorted(CDP_EFFECTS))
def test_a_command_s_effect_is_recorded_before_it_is_sent(method: str) -> None:
    tab, session = _tab()
    asyncio.run(tab.send(method, {}))
    assert session.sent == [method]
    effect = CDP_EFFECTS[method]
    assert tab.dirty == (effect is Effect.SETTINGS)
    assert (tab.changes == {}) == (effect is Effect.NONE)


def test_a_command_nobody_classified_is_refused_unsent() -> None:
    tab, session = _tab()
    with pytest.raises(UnknownCommand, match="Emulation.setScrollbarsHidden"):
        asyncio.run(tab.send("Emulation.setScrollbarsHidden", {"hidden": True}))
    assert session.sent == [] and tab.changes == {}


def test_the_tab_s_playwright_operations_record_and_the_wipe_forgets() -> None:
    tab, _ = _tab()
    asyncio.run(tab.grant_permissions(["geolocation"]))
    assert tab.permissions_granted and not tab.dirty
    asyncio.run(tab.add_init_script("1"))
    assert tab.dirty and tab.changes[Effect.SETTINGS] == ["add_init_script"]
    tab.forget_changes()
    assert not tab.dirty and not tab.permissions_granted
    assert set(PLAYWRIGHT_EFFECTS) <= {name for name in dir(Tab) if not name.startswith("_")}
