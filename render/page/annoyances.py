"""Cookie banners, chat widgets and other overlays: refused or hidden before the capture.

- `block_cookie_banners`: DuckDuckGo's autoconsent opts out of the banner, or hides it where it cannot
  (render/page/consent.py). Whatever banner is still up when the page is captured is hidden on evidence
  (render/page/js/annoyances.js: on top of the page, consent wording, a consent action among its own
  controls), and what banners leave behind is undone: the backdrop, a blur on the page, the scroll lock.
- `block_chats`, `block_socials`: chat widgets and social media buttons of known vendors
  (`render/page/rules/chats.toml`, `render/page/rules/socials.toml`): requests to their hosts are blocked along with
  the job's other blocking rules, their UI is hidden by a style sheet installed before the page's own
  scripts run, and the scroll lock they leave is undone after load.
- `block_banners_by_heuristics`: the same evidence-based hiding of consent banners without autoconsent,
  and sign-up overlays that ask for an e-mail address.

Both checks run after load and again just before the capture (banners often come after `load`).
"""

from __future__ import annotations

import logging
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from playwright.async_api import Error as PlaywrightError

from render.browser.tabs import Tab
from render.contract.options import TakeOptions
from render.page.consent import PAGE_SIDE, Consent, RuleSet
from render.page.styles import style_sheet_init_script

LOG = logging.getLogger(__name__)
RULES_DIR = Path(__file__).parent / "rules"
# The page side as the consent glue installs it in every document (render/page/js/consent.js): a call, where the
# whole source is compiled again at each look (about 1 ms of the page's main thread a look); null without it.
_INSTALLED_PAGE_SIDE = ("async (call) => { const side = globalThis[Symbol.for('screenshot-service.annoyances')]; "
                        "return side ? [await side(call)] : null; }")


@dataclass(frozen=True)
class Platform:
    """One chat widget or social widget vendor, as its rules file describes it."""

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
    """The platforms of one rules file (`chats`, `socials`), read once per process."""
    with (RULES_DIR / f"{kind}.toml").open("rb") as rules:
        tables = tomllib.load(rules)
    return tuple(Platform(name, **{field: tuple(values) for field, values in table.items()})
                 for name, table in tables.items())


async def consent_walls(tab: Tab) -> list[dict[str, Any]]:
    """Consent banners shown now that cover the page (a modal, a quarter of the viewport or more, or with the
    page's scrolling locked), on the same evidence `block_cookie_banners` hides them on."""
    return list(await Annoyances._page_side(tab, "consentWalls", None) or [])


class Annoyances:
    """What one job refuses or hides: the options it names, with the installed autoconsent (`consent_rules`;
    None when it is not installed, then only the evidence-based hiding runs)."""

    def __init__(self, options: TakeOptions, consent_rules: RuleSet | None = None) -> None:
        self.platforms = ((list(platforms("chats")) if options.block_chats else [])
                          + (list(platforms("socials")) if options.block_socials else []))
        self.cookie_banners = options.block_cookie_banners
        self.heuristics = options.block_banners_by_heuristics
        self.consent = Consent(consent_rules) if options.block_cookie_banners and consent_rules else None
        self._selectors = [selector for platform in self.platforms for selector in platform.hide]
        self.hidden = 0  # banners hidden on evidence, for the tests and the log

    @property
    def changes_page(self) -> bool:
        """Whether the page gets init scripts the job cannot take back (the tab is not reused as is
        afterwards). autoconsent's stay on the page, off between jobs (render/page/consent.py)."""
        return bool(self.platforms)

    def blocks(self, url: str) -> bool:
        """Whether a request loads one of the job's chat or social widgets."""
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

    async def install(self, tab: Tab) -> None:
        """Before loading: autoconsent and the chat widgets' style sheet go into every document."""
        if self.consent is not None:
            await self.consent.install(tab)
        if self.platforms:
            await tab.add_init_script(style_sheet_init_script(self.style_sheet()))

    async def clear(self, tab: Tab, deadline: float) -> None:
        """After loading, and again before the capture: let autoconsent finish what it started, and have
        its first look at a banner it has not taken yet; hide what is left and undo what banners left
        behind."""
        if self._selectors:
            await self._look(tab, "unlockAfterPlatforms", self._selectors)
        if not (self.cookie_banners or self.heuristics):
            return
        if self.consent is None:
            found = await self._look(tab, "clearBanners", self._evidence(hide=True))
        else:
            await self.consent.wait_while_busy(deadline)
            found = await self._look(tab, "clearBanners", self._evidence(hide=False))
            if found and found["found"] and not found["hidden"]:  # left up for autoconsent
                await self.consent.wait_while_busy(deadline, banner_up=True)
                found = await self._look(tab, "clearBanners", self._evidence(hide=True))
        self.hidden += found["hidden"] if found else 0
        if self.consent is not None and self.consent.handled:
            LOG.debug("autoconsent opted out of %s; %d banners hidden on evidence", self.consent.handled, self.hidden)

    def _evidence(self, *, hide: bool) -> dict[str, bool]:
        """What the page side is told: whether to hide banners shown now, whether to take sign-up overlays
        too, and whether this job has seen a banner (then the buttons a consent tool leaves go too)."""
        seen = self.hidden > 0 or (self.consent is not None and self.consent.found_banner)
        return {"hide": hide, "signUp": self.heuristics, "seen": seen}

    async def _look(self, tab: Tab, task: str, argument: object) -> Any:
        """`_page_side`, through the copy autoconsent's glue installed when the job runs autoconsent."""
        return await self._page_side(tab, task, argument, installed=self.consent is not None)

    @staticmethod
    async def _page_side(tab: Tab, task: str, argument: object, *, installed: bool = False) -> Any:
        """Run the page side's `task`; `installed`: through the document's own copy when it has one."""
        try:
            if installed and (answer := await tab.run(_INSTALLED_PAGE_SIDE, [task, argument])) is not None:
                return answer[0]
            return await tab.run(PAGE_SIDE, [task, argument])
        except PlaywrightError as error:  # a page navigating away meanwhile: nothing to hide on it
            LOG.debug("annoyances: %s failed: %s", task, error)
            return None
