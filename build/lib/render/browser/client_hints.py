"""Everything a page reads about the browser agrees with the user agent it was given.

A user agent override alone leaves the other signals to headless Chromium: `navigator.userAgentData` and
the `Sec-CH-UA-*` headers name "HeadlessChrome" (or nothing at all), say desktop Linux to a phone
preset, and `navigator.platform` stays "Linux x86_64". Sites that read client hints then serve the
desktop layout, and some hide themselves from what looks like a robot. So every override is sent with the
metadata (`Emulation.setUserAgentOverride`'s `userAgentMetadata`) and `navigator.platform` a real
browser with that user agent has:

- a Chromium-based agent (`Chrome/N`, `Edg/N`) gets Chrome's brand list for version N, with Chromium's
  own "GREASE" brand for that version (see `brands`), and platform, version, model, mobile and form
  factor read from the agent;
- any other agent (Safari on an iPhone or iPad, Silk, Firefox) gets no client hints and no
  `navigator.userAgentData`, as those browsers have none (`HIDE_USER_AGENT_DATA`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# Chromium's GREASE brand (components/embedder_support/user_agent_utils.cc, measured against Chromium 156's
# own list "Not:A-Brand";v="8", "Chromium";v="156"): characters and versions picked by the major version.
_GREASE_CHARACTERS = (" ", "(", ":", "-", ".", "/", ")", ";", "=", "?", "_")
_GREASE_VERSIONS = ("8", "99", "24")
_ORDERS = ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0))

# Removes navigator.userAgentData before any page script runs (an agent of a browser that has none).
HIDE_USER_AGENT_DATA = "delete Object.getPrototypeOf(navigator).userAgentData;"


@dataclass(frozen=True)
class Platform:
    name: str  # userAgentData.platform, Sec-CH-UA-Platform
    version: str  # Sec-CH-UA-Platform-Version
    navigator: str  # navigator.platform
    architecture: str
    bitness: str
    model: str = ""


def brands(major: int, brand: str, version: str) -> list[dict[str, str]]:
    """Chrome's brand list for a major version: the GREASE brand, "Chromium" and `brand`, in the order
    Chromium derives from the version. `version` is the major ("156") or the full version."""
    grease = {"brand": f"Not{_GREASE_CHARACTERS[major % 11]}A{_GREASE_CHARACTERS[(major + 1) % 11]}Brand",
              "version": _GREASE_VERSIONS[major % 3]}
    if "." in version:
        grease["version"] += ".0.0.0"
    listed: list[dict[str, str]] = [{}, {}, {}]
    order = _ORDERS[major % 6]
    listed[order[0]] = grease
    listed[order[1]] = {"brand": "Chromium", "version": version}
    listed[order[2]] = {"brand": brand, "version": version}
    return listed


def platform_of(user_agent: str) -> Platform:
    """The platform a user agent names, as that platform's Chrome reports it."""
    if match := re.search(r"Android ([\d.]+)(?:; ([^;)]+))?", user_agent):
        version = ".".join((match.group(1).split(".") + ["0", "0"])[:3])
        model = (match.group(2) or "").strip()
        model = "" if model in ("K", "wv") else re.sub(r" Build/.*", "", model)
        return Platform("Android", version, "Linux armv81", "", "", model)
    if match := re.search(r"Windows NT ([\d.]+)", user_agent):
        return Platform("Windows", "10.0.0" if match.group(1) == "10.0" else match.group(1) + ".0", "Win32",
                        "x86", "64")
    if match := re.search(r"Mac OS X ([\d_.]+)", user_agent):
        return Platform("macOS", ".".join((re.split(r"[_.]", match.group(1)) + ["0", "0"])[:3]), "MacIntel",
                        "arm", "64")
    if "CrOS" in user_agent:
        return Platform("Chrome OS", "", "Linux x86_64", "x86", "64")
    return Platform("Linux", "", "Linux x86_64", "x86", "64")


def _navigator_platform(user_agent: str) -> str:
    """navigator.platform of a browser without client hints."""
    for token, value in (("iPhone", "iPhone"), ("iPad", "iPad"), ("iPod", "iPod"), ("Macintosh", "MacIntel"),
                         ("Windows", "Win32"), ("Android", "Linux armv81"), ("Silk", "Linux armv7l")):
        if token in user_agent:
            return value
    return "Linux x86_64"


def user_agent_override(user_agent: str, browser_version: str) -> tuple[dict[str, Any], bool]:
    """`Emulation.setUserAgentOverride`'s parameters for `user_agent`, and whether the page must lose
    `navigator.userAgentData` (an agent of a browser that has no client hints). `browser_version` is the
    running Chromium's ("156.0.8078.79"): its full version is reported when the agent names its major."""
    chromium = re.search(r"\b(Edg|Chrome|CriOS)/(\d+)", user_agent)
    if chromium is None or chromium.group(1) == "CriOS" or re.search(r"\b(Silk|Firefox|OPR)/", user_agent):
        # Chrome on iOS is Safari underneath: no client hints either.
        return {"userAgent": user_agent, "platform": _navigator_platform(user_agent)}, True
    major = int(chromium.group(2))
    full = browser_version if browser_version.split(".")[0] == str(major) else f"{major}.0.0.0"
    brand = "Microsoft Edge" if chromium.group(1) == "Edg" else "Google Chrome"
    platform = platform_of(user_agent)
    mobile = platform.name == "Android" and " Mobile" in user_agent
    form_factor = "Mobile" if mobile else "Tablet" if platform.name == "Android" else "Desktop"
    metadata = {
        "brands": brands(major, brand, str(major)),
        "fullVersionList": brands(major, brand, full),
        "fullVersion": full,
        "platform": platform.name,
        "platformVersion": platform.version,
        "architecture": platform.architecture,
        "model": platform.model,
        "mobile": mobile,
        "bitness": platform.bitness,
        "wow64": False,
        "formFactors": [form_factor],
    }
    return {"userAgent": user_agent, "platform": platform.navigator, "userAgentMetadata": metadata}, False
