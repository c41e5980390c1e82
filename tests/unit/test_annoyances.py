"""The rules file of block_chats, how a request is matched to a widget, and the autoconsent block_cookie_banners
runs: installed at the pinned version, connected to the worker by render/js/consent.js."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Frame

from render import consent
from render.annoyances import Annoyances, platforms
from render.options import TakeOptions
from render.settings import RenderSettings
from tests.annoyance_pages import KINDS

PINS = Path(__file__).parents[2] / "deploy" / "npm" / "package.json"


def test_every_chat_widget_has_rules_and_a_test_page() -> None:
    rules = platforms("chats")
    assert [platform.name for platform in rules] == [imitation.name for imitation in KINDS["chats"]]
    assert len(rules) == 17
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
    assert "window.__screenshotConsent" in rules.script and "__CONFIG__" not in rules.script
    assert "autoconsentReceiveMessage" in rules.script  # the bundle itself follows the glue


def test_a_directory_without_autoconsent_gives_no_rules(tmp_path: Path) -> None:
    assert consent.consent_rule_set(RenderSettings(consent_rules_dir=str(tmp_path))) is None
    job = Annoyances(TakeOptions.model_validate({"url": "https://example.com", "block_cookie_banners": True}), None)
    assert job.consent is None and job.cookie_banners


class _Frame(Frame):
    """A stand-in frame for the message handler's bookkeeping (nothing is evaluated in it)."""

    def __init__(self) -> None:  # noqa: D107 (Frame's own constructor needs a live connection)
        pass

    def is_detached(self) -> bool:
        return False


def _send(job: consent.Consent, frame: Frame, **message: Any) -> None:
    asyncio.run(job._receive({"frame": frame}, message))


def test_the_worker_waits_while_a_frame_opts_out_and_not_after() -> None:
    rules = consent.consent_rule_set(RenderSettings())
    assert rules is not None
    job, frame = consent.Consent(rules), _Frame()
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


@pytest.mark.parametrize("message", [None, "text", [1, 2], {"type": "eval", "id": 1, "code": None}, {"type": "x"}])
def test_odd_messages_from_a_page_change_nothing(message: Any) -> None:
    rules = consent.consent_rule_set(RenderSettings())
    assert rules is not None
    job = consent.Consent(rules)
    asyncio.run(job._receive({"frame": _Frame()}, message))
    asyncio.run(job._receive({"frame": "not a frame"}, {"type": "popupFound"}))
    assert not job.busy(0.0) and not job.found_banner


def test_a_page_that_floods_the_binding_is_ignored() -> None:
    rules = consent.consent_rule_set(RenderSettings())
    assert rules is not None
    job, frame = consent.Consent(rules), _Frame()
    for _ in range(consent.MESSAGE_LIMIT):
        _send(job, frame, type="report")
    _send(job, frame, type="popupFound", cmp="late")
    assert not job.found_banner
