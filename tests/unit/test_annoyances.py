"""The rules files of block_cookie_banners and block_chats, and how a request is matched to a platform."""

from __future__ import annotations

import pytest

from render.annoyances import Annoyances, platforms
from render.options import TakeOptions
from tests.annoyance_pages import KINDS


@pytest.mark.parametrize("kind", KINDS)
def test_every_platform_has_rules_and_a_test_page(kind: str) -> None:
    rules = platforms(kind)
    assert [platform.name for platform in rules] == [imitation.name for imitation in KINDS[kind]]
    for platform in rules:
        assert platform.hide, platform.name
        assert platform.hosts or platform.paths, platform.name


def test_the_issue_names_18_consent_platforms_and_17_chats() -> None:
    assert len(platforms("cookie_banners")) == 18
    assert len(platforms("chats")) == 17


def blocks(url: str, **options: bool) -> bool:
    return Annoyances(TakeOptions.model_validate({"url": "https://example.com", **options})).blocks(url)


def test_hosts_match_themselves_and_their_subdomains_only() -> None:
    assert blocks("https://widget.intercom.io/widget/abc", block_chats=True)
    assert blocks("https://intercom.io/x", block_chats=True)
    assert not blocks("https://notintercom.io/x", block_chats=True)
    assert not blocks("https://intercom.io.example.com/x", block_chats=True)


def test_paths_match_on_any_host() -> None:
    url = "https://shop.example/wp-content/plugins/borlabs-cookie/js/borlabs.js"
    assert blocks(url, block_cookie_banners=True)
    assert not blocks(url, block_chats=True)


def test_nothing_is_blocked_without_the_options() -> None:
    assert not blocks("https://consent.cookiebot.com/uc.js")
    assert Annoyances(TakeOptions.model_validate({"url": "https://example.com"})).style_sheet() == ""


def test_unlock_classes_become_css_that_restores_scrolling() -> None:
    sheet = Annoyances(TakeOptions.model_validate({"url": "https://example.com", "block_cookie_banners": True})
                       ).style_sheet()
    assert "#CybotCookiebotDialog { display: none !important; }" in sheet
    assert "html.didomi-popup-open, body.didomi-popup-open { overflow: visible !important;" in sheet
