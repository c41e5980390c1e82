"""Chromium keeps only the last --disable-features and --enable-features: every list must arrive merged."""

from __future__ import annotations

import re
from pathlib import Path

import playwright

from render.browser.chromium import (
    DISABLED_FEATURES,
    PLAYWRIGHT_DISABLED_FEATURES,
    PLAYWRIGHT_ENABLED_FEATURES,
    chromium_arguments,
)

DRIVER_BUNDLE = Path(playwright.__file__).parent / "driver" / "package" / "lib" / "coreBundle.js"


def feature_lists(args: list[str]) -> dict[str, list[str]]:
    switches = [arg for arg in args if arg.startswith(("--disable-features=", "--enable-features="))]
    assert len(switches) == len({arg.split("=")[0] for arg in switches}), f"a feature switch given twice: {switches}"
    return {arg.split("=")[0]: arg.split("=", 1)[1].split(",") for arg in switches}


def test_one_switch_each_with_playwrights_lists_and_the_operators() -> None:
    args = chromium_arguments(["--disable-features=Translate,RenderDocument", "--enable-features=Foo",
                               "--window-size=800,600"])
    lists = feature_lists(args)
    assert lists["--disable-features"] == [*DISABLED_FEATURES, "Translate"]
    assert set(PLAYWRIGHT_DISABLED_FEATURES) < set(lists["--disable-features"])
    assert lists["--enable-features"] == [*PLAYWRIGHT_ENABLED_FEATURES, "Foo"]
    assert "--window-size=800,600" in args
    assert args[-2:] == ["--disable-features=" + ",".join(lists["--disable-features"]),
                         "--enable-features=" + ",".join(lists["--enable-features"])]


def test_playwrights_own_feature_lists_are_all_repeated() -> None:
    """Playwright puts its lists first on the command line; ours come last and replace them, so they must
    contain every name the pinned driver passes (this fails when an upgrade adds one)."""
    bundle = DRIVER_BUNDLE.read_text()
    disabled = re.search(r"disabledFeatures = \[(.*?)\]\.filter", bundle, re.S)
    enabled = re.search(r"enabledFeatures = \(\) => \[(.*?)\]\.filter", bundle, re.S)
    assert disabled and enabled, "Playwright's chromiumSwitches changed shape: read them again"
    names = re.compile(r'"([A-Za-z0-9]+)"')
    assert set(names.findall(re.sub(r"//.*", "", disabled.group(1)))) <= set(PLAYWRIGHT_DISABLED_FEATURES)
    assert set(names.findall(re.sub(r"//.*", "", enabled.group(1)))) <= set(PLAYWRIGHT_ENABLED_FEATURES)


def test_without_the_sandbox_no_zygotes_and_the_network_service_in_the_browser() -> None:
    unsandboxed = chromium_arguments(["--enable-features=Foo"], sandbox=False)
    assert {"--no-sandbox", "--no-zygote"} <= set(unsandboxed)
    assert feature_lists(unsandboxed)["--enable-features"] == [*PLAYWRIGHT_ENABLED_FEATURES,
                                                               "NetworkServiceInProcess2", "Foo"]
    sandboxed = chromium_arguments([], sandbox=True)
    assert not {"--no-sandbox", "--no-zygote"} & set(sandboxed)
    assert "NetworkServiceInProcess2" not in feature_lists(sandboxed)["--enable-features"]
