"""Client hints derived from a user agent (render.browser.client_hints), against what real browsers send."""

from __future__ import annotations

import pytest

from render.browser.client_hints import brands, platform_of, user_agent_override


def header(listed: list[dict[str, str]]) -> str:
    return ", ".join(f'"{entry["brand"]}";v="{entry["version"]}"' for entry in listed)


@pytest.mark.parametrize(("major", "sent"), [
    # Sec-CH-UA of released Chrome builds, and of the headless shell this project runs (with its
    # "HeadlessChrome" where Chrome says "Google Chrome").
    (120, '"Not_A Brand";v="8", "Chromium";v="120", "Google Chrome";v="120"'),
    (124, '"Chromium";v="124", "Google Chrome";v="124", "Not-A.Brand";v="99"'),
    (131, '"Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"'),
    (156, '"Not:A-Brand";v="8", "Chromium";v="156", "Google Chrome";v="156"'),
])
def test_brand_lists_are_chromes_own(major: int, sent: str) -> None:
    assert header(brands(major, "Google Chrome", str(major))) == sent


def test_full_versions_keep_the_grease_brand_and_order() -> None:
    assert header(brands(131, "Google Chrome", "131.0.6778.85")) == (
        '"Google Chrome";v="131.0.6778.85", "Chromium";v="131.0.6778.85", "Not_A Brand";v="24.0.0.0"')


@pytest.mark.parametrize(("agent", "platform", "version", "navigator", "model"), [
    ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Mobile "
     "Safari/537.36", "Android", "14.0.0", "Linux armv81", "Pixel 8"),
    ("Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile "
     "Safari/537.36", "Android", "10.0.0", "Linux armv81", ""),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 "
     "Safari/537.36", "Windows", "10.0.0", "Win32", ""),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 "
     "Safari/537.36", "macOS", "10.15.7", "MacIntel", ""),
    ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36",
     "Linux", "", "Linux x86_64", ""),
])
def test_platforms(agent: str, platform: str, version: str, navigator: str, model: str) -> None:
    found = platform_of(agent)
    assert (found.name, found.version, found.navigator, found.model) == (platform, version, navigator, model)


def test_the_running_version_is_reported_in_full_only_for_its_own_major() -> None:
    agent = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{}.0.0.0 Safari/537.36"
    own, hide = user_agent_override(agent.format(156), "156.0.8078.79")
    assert not hide and own["userAgentMetadata"]["fullVersion"] == "156.0.8078.79"
    other, _ = user_agent_override(agent.format(120), "156.0.8078.79")
    assert other["userAgentMetadata"]["fullVersion"] == "120.0.0.0"


@pytest.mark.parametrize("agent", [
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 "
    "Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (Linux; U; en-us; KFAPWI Build/JDQ39) AppleWebKit/535.19 (KHTML, like Gecko) Silk/3.13 "
    "Safari/535.19 Silk-Accelerated=true",
])
def test_browsers_without_client_hints_get_none(agent: str) -> None:
    override, hide = user_agent_override(agent, "156.0.8078.79")
    assert hide and "userAgentMetadata" not in override
