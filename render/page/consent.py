"""block_cookie_banners: consent banners refused where a maintained rule can, hidden where none can.

The rules are DuckDuckGo's autoconsent (npm `@duckduckgo/autoconsent`, MPL-2.0, used unmodified),
pinned in deploy/npm/package.json and installed by `make` and the Dockerfile. Its Playwright bundle runs
in every document of the page (render/page/js/consent.js connects it to the worker): it recognises a consent
platform by its rules (hundreds of platforms and sites) or a banner by its heuristic (consent wording
and the banner's own buttons, in many languages), pre-hides the platforms it knows while it works, and
opts out by clicking the banner's own buttons, so the page shows what a visitor who refused sees.

The page gets the script and its binding once, the first time a job wants them, and keeps them for its
later jobs; in a job that does not want them the script only asks and stays off. So a page is not
replaced after a block_cookie_banners job, and each document gets only the rules for its own URL (the
generic ones, and its site's), as autoconsent's own extension does.

Before a capture the worker waits for an opt-out under way (`Consent.settle`), and, when a banner is up
that autoconsent has not detected, for its first full look; render/page/annoyances.py then hides what is
still up and undoes what a banner left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from playwright.async_api import Frame

from render.browser.tabs import Tab
from render.settings import RenderSettings

BUNDLED = Path(__file__).parents[2] / "deploy" / "npm" / "node_modules" / "@duckduckgo" / "autoconsent"
_GLUE = (Path(__file__).parent / "js" / "consent.js").read_text()
# The page side of render/page/annoyances.py, evaluated as `([task, argument]) => result`; carried by the glue too.
PAGE_SIDE = (Path(__file__).parent / "js" / "annoyances.js").read_text()
BINDING = "__screenshotConsent"

# autoconsent's configuration (its lib/types.ts `Config`): opt out, pre-hide known banners while it works,
# cosmetic (hide-only) and generated rules too, and its heuristic for banners no rule names, at the level
# that clicks a refusal or, where a banner offers none, an acknowledgement ("OK", "Got it"), never "Accept".
# The script runs in the page's main world (Playwright's init scripts do), so the rules' snippets run
# inline (`isMainWorld`) rather than through the worker.
CONFIG = {
    "enabled": True, "autoAction": "optOut", "disabledCmps": [], "enablePrehide": True,
    "enableCosmeticRules": True, "enableGeneratedRules": True, "detectRetries": 20, "isMainWorld": True,
    "prehideTimeout": 2000, "enableHeuristicDetection": True, "heuristicMode": "tier1",
    "enablePopupMutationObserver": True, "visualTest": False, "performanceLoggingEnabled": False,
    "logs": {"lifecycle": False, "rulesteps": False, "detectionsteps": False, "evals": False, "errors": False,
             "messages": False, "waits": False},
}
# How long autoconsent gets to find the banner of a platform it detected: its own popup check runs
# every 500 ms.
POPUP_GRACE_SECONDS = 1.2
# The longest wait for an opt-out under way; its rules' own waits for a banner's next screen are shorter.
OPT_OUT_LIMIT_SECONDS = 5.0
# A banner is up that autoconsent has not detected: how long it gets to have its first full look (it
# starts when the page is first idle, and its heuristic runs on its second look, 500 ms after the first)
# before the banner is hidden instead.
HANDOVER_SECONDS = 1.5
# How often `Consent.settle` looks at its time limits while no message comes.
SETTLE_POLL_SECONDS = 0.02
# Messages a page may send the worker in one job: a page that keeps calling the binding is ignored after.
MESSAGE_LIMIT = 500


@dataclass(frozen=True, eq=False)
class RuleSet:
    """The installed autoconsent: its version, the script a page runs in each document, and its rules."""

    version: str
    script: str
    rules: dict[str, Any]  # rules/compact-rules.json

    @cached_property
    def _patterns(self) -> list[re.Pattern[str] | None]:
        """Each rule's URL pattern (a JavaScript regular expression these patterns share with Python's)."""
        patterns: list[re.Pattern[str] | None] = []
        for rule in self.rules["r"]:
            try:
                patterns.append(re.compile(rule[3]) if len(rule) > 3 and rule[3] else None)
            except re.error:
                patterns.append(re.compile(r"(?!)"))  # a pattern Python cannot read never matches
        return patterns

    def _runs(self, index: int, url: str, main_frame: bool) -> bool:
        """Whether rule `index` runs in a document at `url` (rule[4] is where: 1 frames only; 10, 12, 20 and 22
        the top document only)."""
        rule = self.rules["r"][index]
        where = rule[4] if len(rule) > 4 else 0
        if (main_frame and where == 1) or (not main_frame and where in (10, 12, 20, 22)):
            return False
        pattern = self._patterns[index]
        return pattern is None or pattern.search(url) is not None

    @cached_property
    def _generic(self) -> str:
        index, rules = self.rules["index"], self.rules
        first, last = index["genericRuleRange"]
        return json.dumps({"v": rules["v"], "s": rules["s"][:index["genericStringEnd"]], "r": rules["r"][first:last]},
                          separators=(",", ":"))

    def for_document(self, url: str, main_frame: bool) -> str:
        """The rules a document at `url` needs, as JSON: what autoconsent's own `filterCompactRules` gives
        its content scripts. A top document gets the generic rules and the rules of its site; a frame,
        the rules written for frames."""
        index, rules = self.rules["index"], self.rules
        if not main_frame:
            first, last = index["frameRuleRange"]
            chosen = [rules["r"][at] for at in range(first, last) if self._runs(at, url, False)]
            return json.dumps({"v": rules["v"], "s": rules["s"][:index["frameStringEnd"]], "r": chosen},
                              separators=(",", ":"))
        first, last = index["specificRuleRange"]
        specific = [rules["r"][at] for at in range(first, last) if self._runs(at, url, True)]
        if not specific:
            return self._generic
        generic_first, generic_last = index["genericRuleRange"]
        return json.dumps({"v": rules["v"], "s": rules["s"],
                           "r": rules["r"][generic_first:generic_last] + specific}, separators=(",", ":"))


@cache
def rule_set(directory: Path = BUNDLED) -> RuleSet | None:
    """autoconsent as installed in `directory`, or None when it is not installed there."""
    try:
        package = json.loads((directory / "package.json").read_text())
        bundle = (directory / "dist" / "autoconsent.playwright.js").read_text()
        rules = json.loads((directory / "rules" / "compact-rules.json").read_text())
        rules["index"]["genericRuleRange"]  # noqa: B018 (the layout this module reads)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    script = _GLUE.replace("__BINDING__", BINDING).replace("__PAGE_SIDE__", PAGE_SIDE).replace("__BUNDLE__", bundle)
    return RuleSet(str(package.get("version", "")), script, rules)


def consent_rule_set(settings: RenderSettings) -> RuleSet | None:
    """The autoconsent the settings name (SCREENSHOT_CONSENT_RULES_DIR), or the checkout's own."""
    return rule_set(Path(settings.consent_rules_dir) if settings.consent_rules_dir else BUNDLED)


class _Relay:
    """The binding of one page: it hands what the page's documents send to the job now on the page, and
    to nobody between jobs (the page's autoconsent then stays off)."""

    def __init__(self) -> None:
        self.job: Consent | None = None

    def switch_off(self) -> None:
        self.job = None

    async def receive(self, source: dict[str, Any], message: Any) -> Any:
        job = self.job
        return None if job is None else await job.receive(source, message)


# autoconsent looks for a consent platform when the page is first idle, then every 500 ms; its heuristic
# runs on its second look. Once it starts its third, it has had its full first look at the document.
FULL_LOOK = 3


@dataclass
class _FrameState:
    """What autoconsent reported from one frame."""

    detected_at: float | None = None
    popup: bool = False
    finished: bool = False
    cmp: str = ""
    opted_out: bool = False
    looks: int = 0  # the looks for a platform it has started (reported up to FULL_LOOK)


class Consent:
    """One job's autoconsent: switched on in the job's page before it loads, waited for before the capture."""

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        self._frames: dict[Frame, _FrameState] = {}
        self._messages = 0
        self._heard = asyncio.Event()  # set by each message: `settle` looks again at once

    async def install(self, tab: Tab) -> None:
        """Switches autoconsent on in the tab's page for this job. The page gets the binding and the script
        once, the first time a job wants them; they stay for its later jobs, off unless a job switches
        them on (`Tab.helpers`), so the page is not replaced after the job."""
        relay = tab.helpers.get(BINDING)
        if not isinstance(relay, _Relay):
            relay = _Relay()
            await tab.add_helper(BINDING, relay, relay.receive, self.rules.script)
        relay.job = self

    @property
    def handled(self) -> list[str]:
        """The platforms autoconsent opted out of (or hid), for the worker's debug log."""
        return [state.cmp for state in self._frames.values() if state.opted_out]

    @property
    def found_banner(self) -> bool:
        return any(state.popup for state in self._frames.values())

    def busy(self, now: float, *, banner_up: bool = False) -> bool:
        """Whether a frame's autoconsent is still at work: opting out, or looking for the banner of a
        platform it detected a moment ago. With `banner_up` (a banner is on the page), also while the top
        document's autoconsent has not yet had its first full look, its heuristic included."""
        for frame, state in self._frames.items():
            if state.finished or frame.is_detached():
                continue
            if state.popup:
                return True
            if state.detected_at is not None and now - state.detected_at < POPUP_GRACE_SECONDS:
                return True
            if banner_up and frame.parent_frame is None and state.looks < FULL_LOOK:
                return True
        return False

    async def wait_while_busy(self, deadline: float, *, banner_up: bool = False) -> None:
        """Waits while autoconsent is at work (`busy`), at most OPT_OUT_LIMIT_SECONDS (HANDOVER_SECONDS
        while it is only still looking) and never past `deadline`."""
        start = time.monotonic()
        limit = min(start + OPT_OUT_LIMIT_SECONDS, deadline)
        looking_limit = min(start + HANDOVER_SECONDS, limit)
        while (now := time.monotonic()) < limit:
            if not self.busy(now, banner_up=banner_up and now < looking_limit):
                return
            # A message (an opt-out's result, a new look) ends the wait at once; the time limits above are
            # looked at every SETTLE_POLL_SECONDS.
            self._heard.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._heard.wait(), min(SETTLE_POLL_SECONDS, limit - now))

    async def receive(self, source: dict[str, Any], message: Any) -> Any:
        """A message of a frame's autoconsent (render/page/js/consent.js forwards them); for `init`, the
        answer: the configuration and the document's rules."""
        self._messages += 1
        if self._messages > MESSAGE_LIMIT or not isinstance(message, dict):
            return None
        self._heard.set()  # after this message's state is written below (no await comes between)
        frame = source.get("frame")
        if not isinstance(frame, Frame):
            return None
        kind = message.get("type")
        if kind == "init":
            url = message.get("url")
            if not isinstance(url, str):
                return None
            self._frames.setdefault(frame, _FrameState())
            return {"config": CONFIG, "rules": self.rules.for_document(url[:4096], frame.parent_frame is None)}
        state = self._frames.setdefault(frame, _FrameState())
        cmp = str(message.get("cmp") or "")[:100]
        if kind == "looking":
            looks = message.get("attempts")
            state.looks = looks if isinstance(looks, int) else FULL_LOOK
        elif kind == "cmpDetected":
            state.detected_at = time.monotonic()
            state.cmp = cmp
        elif kind == "popupFound":
            state.popup = True
            state.cmp = cmp
        elif kind in ("optOutResult", "optInResult"):
            state.finished = True
            state.opted_out = message.get("result") is True
        elif kind == "autoconsentDone":
            state.finished = True
            state.opted_out = True
        return None
