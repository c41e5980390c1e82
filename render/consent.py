"""block_cookie_banners: consent banners refused where a maintained rule can, hidden where none can.

The rules are DuckDuckGo's autoconsent (npm `@duckduckgo/autoconsent`, MPL-2.0, used unmodified),
pinned in deploy/npm/package.json and installed by `make` and the Dockerfile. Its Playwright bundle runs
in every document of the page (render/js/consent.js connects it to the worker): it recognises a consent
platform by its rules (hundreds of platforms and sites) or a banner by its heuristic (consent wording
and the banner's own buttons, in many languages), pre-hides the platforms it knows while it works, and
opts out by clicking the banner's own buttons, so the page shows what a visitor who refused sees.

Before a capture the worker waits for an opt-out under way (`Consent.settle`), then render/annoyances.py
hides what is still up and undoes what a banner left behind.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Frame, Page

from render.settings import RenderSettings

BUNDLED = Path(__file__).parents[1] / "deploy" / "npm" / "node_modules" / "@duckduckgo" / "autoconsent"
_GLUE = (Path(__file__).parent / "js" / "consent.js").read_text()
BINDING = "__screenshotConsent"

# autoconsent's configuration (its lib/types.ts `Config`): opt out, pre-hide known banners while it works,
# cosmetic (hide-only) and generated rules too, and its heuristic for banners no rule names, at the level
# that clicks a refusal or, where a banner offers none, an acknowledgement ("OK", "Got it"), never "Accept".
CONFIG = {
    "enabled": True, "autoAction": "optOut", "disabledCmps": [], "enablePrehide": True,
    "enableCosmeticRules": True, "enableGeneratedRules": True, "detectRetries": 20, "isMainWorld": False,
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
# Messages a page may send the worker in one job: a page that keeps calling the binding is ignored after.
MESSAGE_LIMIT = 500


@dataclass(frozen=True)
class RuleSet:
    """The installed autoconsent: its version and the script every document runs."""

    version: str
    script: str


@cache
def rule_set(directory: Path = BUNDLED) -> RuleSet | None:
    """autoconsent as installed in `directory`, or None when it is not installed there."""
    try:
        package = json.loads((directory / "package.json").read_text())
        bundle = (directory / "dist" / "autoconsent.playwright.js").read_text()
        rules = (directory / "rules" / "compact-rules.json").read_text()
    except (OSError, ValueError):
        return None
    glue = (_GLUE.replace("__BINDING__", BINDING).replace("__CONFIG__", json.dumps(CONFIG))
            .replace("__RULES__", json.dumps(rules)))
    return RuleSet(str(package.get("version", "")), glue + "\n" + bundle)


def consent_rule_set(settings: RenderSettings) -> RuleSet | None:
    """The autoconsent the settings name (SCREENSHOT_CONSENT_RULES_DIR), or the checkout's own."""
    return rule_set(Path(settings.consent_rules_dir) if settings.consent_rules_dir else BUNDLED)


@dataclass
class _FrameState:
    """What autoconsent reported from one frame."""

    detected_at: float | None = None
    popup: bool = False
    finished: bool = False
    cmp: str = ""
    opted_out: bool = False


class Consent:
    """One job's autoconsent: installed before the page loads, waited for before the capture."""

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        self._frames: dict[Frame, _FrameState] = {}
        self._messages = 0

    async def install(self, page: Page) -> None:
        await page.expose_binding(BINDING, self._receive)
        await page.add_init_script(self.rules.script)

    @property
    def handled(self) -> list[str]:
        """The platforms autoconsent opted out of (or hid), for the worker's debug log."""
        return [state.cmp for state in self._frames.values() if state.opted_out]

    @property
    def found_banner(self) -> bool:
        return any(state.popup for state in self._frames.values())

    def busy(self, now: float) -> bool:
        """Whether a frame's autoconsent is still at work: opting out, or looking for the banner of a
        platform it detected a moment ago."""
        for frame, state in self._frames.items():
            if state.finished or frame.is_detached():
                continue
            if state.popup:
                return True
            if state.detected_at is not None and now - state.detected_at < POPUP_GRACE_SECONDS:
                return True
        return False

    async def settle(self, deadline: float) -> None:
        """Waits while autoconsent is at work, at most OPT_OUT_LIMIT_SECONDS and never past `deadline`."""
        start = time.monotonic()
        limit = min(start + OPT_OUT_LIMIT_SECONDS, deadline)
        while self.busy(now := time.monotonic()) and now < limit:
            await asyncio.sleep(0.03)

    async def _receive(self, source: dict[str, Any], message: Any) -> None:
        """A message of a frame's autoconsent (render/js/consent.js forwards them)."""
        self._messages += 1
        if self._messages > MESSAGE_LIMIT or not isinstance(message, dict):
            return
        frame = source.get("frame")
        if not isinstance(frame, Frame):
            return
        kind = message.get("type")
        if kind == "eval":
            await self._eval(frame, message.get("id"), message.get("code"))
            return
        state = self._frames.setdefault(frame, _FrameState())
        cmp = str(message.get("cmp") or "")[:100]
        if kind == "cmpDetected":
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

    @staticmethod
    async def _eval(frame: Frame, request: Any, code: Any) -> None:
        """Runs a rule's snippet in the frame's main world and answers whether it held (false on error)."""
        if not isinstance(request, str) or not isinstance(code, str):
            return
        try:
            result = bool(await frame.evaluate(code))  # a snippet's answer is a condition (requestEval: boolean)
        except PlaywrightError:
            result = False
        try:
            await frame.evaluate("(reply) => window.autoconsentReceiveMessage?.(reply)",
                                 {"type": "evalResp", "id": request, "result": result})
        except PlaywrightError:
            pass  # the frame went away
