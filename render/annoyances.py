"""Cookie banners and chat widgets: known platforms from rules files, the rest by heuristics.

Known platforms are data (`render/rules/cookie_banners.toml`, `render/rules/chats.toml`): requests to
their hosts and paths are blocked along with the job's other blocking rules, their UI is hidden by a
style sheet installed before the page's own scripts run, and the scroll lock they leave on <html> or
<body> is undone after load. `block_banners_by_heuristics` finds other overlays by what they look like
and say (render/js/annoyances.js).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit

from playwright.async_api import Page

from render.options import TakeOptions
from render.styles import style_sheet_init_script

RULES_DIR = Path(__file__).parent / "rules"
_PAGE_SIDE = (Path(__file__).parent / "js" / "annoyances.js").read_text()


@dataclass(frozen=True)
class Platform:
    """One consent platform or chat widget, as its rules file describes it."""

    name: str
    hosts: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    hide: tuple[str, ...] = ()
    unlock: tuple[str, ...] = ()

    def serves(self, host: str, path: str) -> bool:
        """Whether a request to `host` and `path` loads this platform."""
        return (any(host == own or host.endswith("." + own) for own in self.hosts)
                or any(fragment in path for fragment in self.paths))


@cache
def platforms(kind: str) -> tuple[Platform, ...]:
    """The platforms of one rules file (`cookie_banners` or `chats`), read once per process."""
    with (RULES_DIR / f"{kind}.toml").open("rb") as rules:
        tables = tomllib.load(rules)
    return tuple(Platform(name, **{field: tuple(values) for field, values in table.items()})
                 for name, table in tables.items())


def wanted(options: TakeOptions) -> bool:
    return bool(options.block_cookie_banners or options.block_chats or options.block_banners_by_heuristics)


class Annoyances:
    """What one job hides: the platforms its options name, and the heuristics when asked."""

    def __init__(self, options: TakeOptions) -> None:
        kinds = [kind for kind, wanted_kind in (("cookie_banners", options.block_cookie_banners),
                                                ("chats", options.block_chats)) if wanted_kind]
        self.platforms = [platform for kind in kinds for platform in platforms(kind)]
        self.heuristics = options.block_banners_by_heuristics
        self._selectors = [selector for platform in self.platforms for selector in platform.hide]

    def blocks(self, url: str) -> bool:
        """Whether a request loads one of the job's platforms."""
        if not self.platforms:
            return False
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        return any(platform.serves(host, parts.path) for platform in self.platforms)

    def style_sheet(self) -> str:
        """Hides every platform's UI and undoes the scroll locks their classes put on <html>/<body>."""
        rules = [f"{selector} {{ display: none !important; }}" for selector in self._selectors]
        for platform in self.platforms:
            for name in platform.unlock:
                rules.append(f"html.{name}, body.{name} {{ overflow: visible !important; "
                             "position: static !important; }")
        return "\n".join(rules)

    async def install(self, page: Page) -> None:
        """Before loading: the style sheet goes into every document from its start."""
        if self.platforms:
            await page.add_init_script(style_sheet_init_script(self.style_sheet()))

    async def clear(self, page: Page) -> int:
        """After loading: undo the platforms' scroll locks and apply the heuristics.
        Returns how many elements the heuristics hid."""
        if self._selectors:
            await page.evaluate(f"(args) => ({_PAGE_SIDE})(args)", ["unlockAfterPlatforms", self._selectors])
        if self.heuristics:
            return int(await page.evaluate(f"(args) => ({_PAGE_SIDE})(args)", ["hideByHeuristics", None]))
        return 0
