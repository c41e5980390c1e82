"""The rules files of block_chats and block_socials, how a request is matched to a widget, and the
autoconsent block_cookie_banners runs: installed at the pinned version, connected to the worker by
render/page/js/consent.js."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Frame

from render.contract.options import TakeOptions
from render.page import consent
from render.page.annoyances import Annoyances, platforms
from render.settings import RenderSettings
from tests.support.pages.annoyances import KINDS

PINS = Path(__file__).parents[2] / "deploy" / "npm" / "package.json"


@pytest.mark.parametrize(("kind", "count"), [("chats", 17), ("socials", 10)])
def test_every_widget_has_rules_and_a_test_page(kind: str, count: int) -> None:
    rules = platforms(kind)
    assert [platform.name for platform in rules] == [imitation.name for imitation in KINDS[kind]]
    assert len(rules) == count
    for platform in rules:
        assert platform.hide, platform.name
        assert platform.hosts or platform.paths, platform.name


def blocks(url: str, **options: bool) -> bool:
    return Annoyances(TakeOptions.model_validate({"url": "https://example.com", **options})).blocks(url)


def test_hosts_match_themselves_and_their_subdomains_only() -> None:
    assert blocks("https://widget.intercom.io/widget/abc", block_chats=True)
    assert blocks("https://intercom.io/x", block_chats=True)
    assert not blocks("https://notintercom.io/x", block_chats=True)
    assert not blocks("https://intercom.io.example.com/x", block_chats=True)


def test_paths_match_on_any_host() -> None:
    assert blocks("https://shop.example/packs/js/sdk.js", block_chats=True)
    assert not blocks("https://shop.example/packs/js/app.js", block_chats=True)


def test_cookie_banners_block_no_request() -> None:
    """Opting out needs the consent platform's own script: block_cookie_banners blocks nothing."""
    assert not blocks("https://consent.cookiebot.com/uc.js", block_cookie_banners=True)
    assert not blocks("https://widget.intercom.io/widget/abc", block_cookie_banners=True)
    assert Annoyances(TakeOptions.model_validate({"url": "https://example.com", "block_cookie_banners": True})
                      ).style_sheet() == ""


def test_the_installed_autoconsent_is_the_pinned_one() -> None:
    pinned = json.loads(PINS.read_text())["dependencies"]["@duckduckgo/autoconsent"]
    rules = consent.consent_rule_set(RenderSettings())
    assert rules is not None, "autoconsent is not installed: `make` runs npm ci in deploy/npm"
    assert rules.version == pinned
    assert "window.__screenshotConsent" in rules.script and "__BUNDLE__" not in rules.script
    assert "autoconsentReceiveMessage" in rules.script  # the bundle itself, inside the glue


def test_a_directory_without_autoconsent_gives_no_rules(tmp_path: Path) -> None:
    assert consent.consent_rule_set(RenderSettings(consent_rules_dir=str(tmp_path))) is None
    job = Annoyances(TakeOptions.model_validate({"url": "https://example.com", "block_cookie_banners": True}), None)
    assert job.consent is None and job.cookie_banners


# autoconsent's own filter (dist/autoconsent.cjs.js exports it), run by Node on the installed package.
_FILTER_IN_NODE = """
const { filterCompactRules } = require(process.argv[1] + '/dist/autoconsent.cjs.js');
const rules = require(process.argv[1] + '/rules/compact-rules.json');
const cases = JSON.parse(process.argv[2]);
console.log(JSON.stringify(cases.map(([url, mainFrame]) => filterCompactRules(rules, { url, mainFrame }))));
"""


def test_each_document_gets_the_rules_autoconsent_itself_would_give_it() -> None:
    """The worker chooses a document's rules as autoconsent's filterCompactRules does: the generic rules
    and the rules of its site for a top document, the rules for frames for a frame."""
    rules = consent.consent_rule_set(RenderSettings())
    assert rules is not None
    node = shutil.which("node")
    assert node is not None, "Node.js is missing: `make` installs it with npm"
    sites = [rule[3] for rule in rules.rules["r"][slice(*rules.rules["index"]["specificRuleRange"])]
             if rule[3] and rule[4] != 1]  # 1: a rule for frames only
    # A site some top-document rule is written for: its pattern reads "^https?://(www\.)?example\.com/".
    host = next(re.sub(r"\\(.)", r"\1", found.group(1)) for pattern in sites
                if (found := re.match(r"\^https\?://\(www\\\.\)\?([\w\\.-]+)/", pattern)))
    site = f"https://www.{host}/page"
    cases = [("https://example.com/article", True), (site, True), ("https://example.com/frame", False),
             ("https://cdn.privacy-mgmt.com/index.html?message_id=1", False), (site, False)]
    run = subprocess.run([node, "-e", _FILTER_IN_NODE, str(consent.BUNDLED), json.dumps(cases)],
                         capture_output=True, text=True, check=True, timeout=60)
    for (url, main_frame), theirs in zip(cases, json.loads(run.stdout), strict=True):
        ours = json.loads(rules.for_document(url, main_frame))
        assert ours["v"] == theirs["v"] and ours["r"] == theirs["r"], url
        # Theirs blanks the strings no chosen rule uses; every string a rule uses is the same in ours.
        assert all(ours["s"][at] == text for at, text in enumerate(theirs["s"]) if text), url
    assert len(json.loads(rules.for_document(site, True))["r"]) > len(json.loads(
        rules.for_document(cases[0][0], True))["r"]), "the site's own rule was not chosen"


class _Frame(Frame):
    """A stand-in frame for the message handler's bookkeeping (nothing is evaluated in it)."""

    def __init__(self, parent: Frame | None = None) -> None:  # noqa: D107 (Frame's own needs a connection)
        self._parent = parent

    def is_detached(self) -> bool:
        return False

    @property
    def parent_frame(self) -> Frame | None:
        return self._parent


def _send(job: consent.Consent, frame: Frame, **message: Any) -> Any:
    return asyncio.run(job.receive({"frame": frame}, message))


def _job() -> consent.Consent:
    rules = consent.consent_rule_set(RenderSettings())
    assert rules is not None
    return consent.Consent(rules)


def test_init_is_answered_with_the_configuration_and_the_documents_rules() -> None:
    job = _job()
    top = _Frame()
    answer = _send(job, top, type="init", url="https://example.com/")
    assert answer["config"]["autoAction"] == "optOut" and answer["config"]["isMainWorld"]
    assert answer["rules"] == job.rules.for_document("https://example.com/", True)
    assert _send(job, _Frame(top), type="init", url="https://example.com/")["rules"] == job.rules.for_document(
        "https://example.com/", False)
    assert _send(job, top, type="init", url=None) is None


def test_the_worker_waits_while_a_frame_opts_out_and_not_after() -> None:
    job, frame = _job(), _Frame()
    assert not job.busy(0.0)
    _send(job, frame, type="cmpDetected", cmp="Klaro")
    detected = job._frames[frame].detected_at
    assert detected is not None
    assert job.busy(detected + 0.1)  # looking for the platform's banner
    assert not job.busy(detected + consent.POPUP_GRACE_SECONDS + 0.1)  # detected, but no banner shown
    _send(job, frame, type="popupFound", cmp="Klaro")
    assert job.busy(detected + 60) and job.found_banner  # opting out takes as long as it takes
    _send(job, frame, type="optOutResult", cmp="Klaro", result=True)
    assert not job.busy(detected + 60)
    assert job.handled == ["Klaro"]


def test_a_banner_up_waits_for_autoconsents_first_full_look_in_the_top_document_only() -> None:
    job, top = _job(), _Frame()
    frame = _Frame(top)
    _send(job, top, type="init", url="https://example.com/")
    _send(job, frame, type="init", url="https://example.com/frame")
    assert job.busy(0.0, banner_up=True) and not job.busy(0.0)
    _send(job, top, type="looking", attempts=2)  # its heuristic's look
    assert job.busy(0.0, banner_up=True)
    _send(job, top, type="looking", attempts=consent.FULL_LOOK)
    assert not job.busy(0.0, banner_up=True)  # the frame's own looks do not count


def test_the_wait_ends_when_the_opt_out_is_reported_not_at_the_next_look(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker hears the opt-out's result the moment the page sends it: with the time limits looked at only
    every minute, the result still ends the wait (before, each wait ran to its next 20 ms look)."""
    monkeypatch.setattr(consent, "SETTLE_POLL_SECONDS", 60.0)
    job, frame = _job(), _Frame()

    async def opt_out_while_waiting() -> bool:
        await job.receive({"frame": frame}, {"type": "popupFound", "cmp": "Klaro"})
        waiting = asyncio.ensure_future(job.wait_while_busy(time.monotonic() + 120))
        await asyncio.sleep(0)  # the wait has begun
        assert not waiting.done()
        await job.receive({"frame": frame}, {"type": "optOutResult", "cmp": "Klaro", "result": True})
        done, _ = await asyncio.wait([waiting], timeout=10)  # the poll alone would take 60 s
        return bool(done)

    assert asyncio.run(opt_out_while_waiting())


def test_between_jobs_the_page_side_gets_no_answer() -> None:
    job, relay = _job(), consent._Relay()
    relay.job = job
    assert asyncio.run(relay.receive({"frame": _Frame()}, {"type": "init", "url": "https://example.com/"}))
    relay.switch_off()
    assert asyncio.run(relay.receive({"frame": _Frame()}, {"type": "init", "url": "https://example.com/"})) is None


@pytest.mark.parametrize("message", [None, "text", [1, 2], {"type": "eval", "id": 1, "code": "1"},
                                     {"type": "init", "url": 5}, {"type": "looking", "attempts": "x"},
                                     {"type": "x"}])
def test_odd_messages_from_a_page_change_nothing(message: Any) -> None:
    job = _job()
    assert asyncio.run(job.receive({"frame": _Frame()}, message)) is None
    asyncio.run(job.receive({"frame": "not a frame"}, {"type": "popupFound"}))
    assert not job.busy(0.0) and not job.found_banner


def test_a_page_that_floods_the_binding_is_ignored() -> None:
    job, frame = _job(), _Frame()
    for _ in range(consent.MESSAGE_LIMIT):
        _send(job, frame, type="looking", attempts=1)
    _send(job, frame, type="popupFound", cmp="late")
    assert not job.found_banner
    assert _send(job, frame, type="init", url="https://example.com/") is None
