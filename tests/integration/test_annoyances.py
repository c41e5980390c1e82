"""block_chats and block_socials against imitations of 17 chat widgets and 10 social widgets
(tests/support/pages/annoyances.py), and
block_banners_by_heuristics against banners no rule knows (real consent libraries: test_consent.py)."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import Org
from tests.support.images import decode, rgb_at
from tests.support.pages.annoyances import (
    GREEN,
    HEURISTICS_POINTS,
    KINDS,
    LOCK_PROBE_SCRIPT,
    LOCKS,
    PROBE_POINT,
    RED,
    VIEWPORT,
    WHITE,
    cell,
    requested,
)
from tests.support.site import Site

pytestmark = pytest.mark.browser
OPTION = {"chats": "block_chats", "socials": "block_socials"}


def centre(index: int) -> tuple[int, int]:
    left, top = cell(index)
    return left + 40, top + 40


def capture(client: httpx.Client, org: Org, site: Site, path: str, *pairs: tuple[str, str]
            ) -> tuple[httpx.Response, list[tuple[str, dict[str, str]]]]:
    """Capture `path` of the HTTPS site as publisher.test; returns the response and what the site served."""
    before = len(site.server.log)
    response = client.get("/v1/screenshot/take", params=[
        ("access_key", org.access_key), ("url", f"https://publisher.test:{site.port}{path}"),
        ("viewport_width", str(VIEWPORT[0])), ("viewport_height", str(VIEWPORT[1])),
        ("scripts", LOCK_PROBE_SCRIPT), *pairs])
    assert response.status_code == 200, response.text
    return response, site.server.log[before:]


@pytest.mark.parametrize("kind", KINDS)
def test_without_the_option_every_platform_loads_shows_and_locks_scrolling(
        client: httpx.Client, org: Org, tls_site: Site, kind: str) -> None:
    response, served = capture(client, org, tls_site, f"/annoyances/{kind}.html")
    shot = decode(response.content)
    for index, imitation in enumerate(KINDS[kind]):
        assert requested(served, imitation), f"{imitation.name}: its script was not requested"
        assert rgb_at(shot, *centre(index)) == RED, f"{imitation.name}: not shown"
    assert rgb_at(shot, *PROBE_POINT) == (RED if kind in LOCKS else GREEN)


@pytest.mark.parametrize(("kind", "name"), [(kind, imitation.name) for kind, imitations in KINDS.items()
                                            for imitation in imitations])
def test_each_platform_is_blocked_hidden_and_scrolling_restored(
        client: httpx.Client, org: Org, tls_site: Site, kind: str, name: str) -> None:
    index, imitation = next((i, m) for i, m in enumerate(KINDS[kind]) if m.name == name)
    response, served = capture(client, org, tls_site, f"/annoyances/{kind}.html?only={name}", (OPTION[kind], "true"))
    shot = decode(response.content)
    assert not requested(served, imitation), "the platform's script was fetched"
    assert rgb_at(shot, *centre(index)) == WHITE, "the platform's UI is visible"
    assert rgb_at(shot, *PROBE_POINT) == GREEN, "scrolling is still locked"


def test_the_options_are_independent(client: httpx.Client, org: Org, tls_site: Site) -> None:
    response, served = capture(client, org, tls_site, "/annoyances/chats.html", ("block_cookie_banners", "true"))
    shot = decode(response.content)
    for index, imitation in enumerate(KINDS["chats"]):
        assert requested(served, imitation), imitation.name
        assert rgb_at(shot, *centre(index)) == RED, imitation.name


def test_heuristics_hide_unknown_banners_and_nothing_else(client: httpx.Client, org: Org, tls_site: Site) -> None:
    before = decode(capture(client, org, tls_site, "/annoyances/heuristics.html")[0].content)
    assert rgb_at(before, *HEURISTICS_POINTS["cookie bar"][0]) == RED
    assert rgb_at(before, *HEURISTICS_POINTS["newsletter dialog and its shade"][0]) == (255, 0, 255)
    response, _ = capture(client, org, tls_site, "/annoyances/heuristics.html", ("block_banners_by_heuristics", "true"))
    after = decode(response.content)
    for what, (point, colour) in HEURISTICS_POINTS.items():
        assert rgb_at(after, *point) == colour, what
