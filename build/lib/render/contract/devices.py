"""Device presets of `viewport_device`, and how a request's viewport is resolved from them.

A preset sets width, height, scale factor, mobile, touch, landscape and a user agent; every
portrait device also has a `_landscape` id. Individual viewport parameters override the preset.
User agents carry `{chrome}`, filled with the running Chromium's major version so they stay
consistent with the browser actually rendering.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Device:
    """One preset: what a `viewport_device` id sets."""

    width: int
    height: int
    scale: float
    mobile: bool
    touch: bool
    user_agent: str
    landscape: bool = False


def _iphone(ios: str) -> str:
    return (f"Mozilla/5.0 (iPhone; CPU iPhone OS {ios} like Mac OS X) AppleWebKit/605.1.15 "
            f"(KHTML, like Gecko) Version/{ios.split('_')[0]}.0 Mobile/15E148 Safari/604.1")


def _ipad(ios: str) -> str:
    return (f"Mozilla/5.0 (iPad; CPU OS {ios} like Mac OS X) AppleWebKit/605.1.15 "
            f"(KHTML, like Gecko) Version/{ios.split('_')[0]}.0 Mobile/15E148 Safari/604.1")


def _android(android: str, model: str, *, tablet: bool = False) -> str:
    mobile = "" if tablet else "Mobile "
    return (f"Mozilla/5.0 (Linux; Android {android}; {model}) AppleWebKit/537.36 "
            f"(KHTML, like Gecko) Chrome/{{chrome}}.0.0.0 {mobile}Safari/537.36")


WINDOWS_CHROME = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 "
                  "(KHTML, like Gecko) Chrome/{chrome}.0.0.0 Safari/537.36")
MAC_CHROME = ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 "
              "(KHTML, like Gecko) Chrome/{chrome}.0.0.0 Safari/537.36")
KINDLE = ("Mozilla/5.0 (Linux; U; en-us; KFAPWI Build/JDQ39) AppleWebKit/535.19 "
          "(KHTML, like Gecko) Silk/3.13 Safari/535.19 Silk-Accelerated=true")


def _phone(w: int, h: int, s: float, ua: str) -> Device:
    return Device(w, h, s, mobile=True, touch=True, user_agent=ua)


def _desktop(w: int, h: int, s: float = 1, ua: str = WINDOWS_CHROME) -> Device:
    return Device(w, h, s, mobile=False, touch=False, user_agent=ua)


_PORTRAIT_AND_DESKTOP: dict[str, Device] = {
    # iPhones
    "iphone_se": _phone(375, 667, 2, _iphone("16_6")),
    "iphone_xr": _phone(414, 896, 2, _iphone("16_6")),
    "iphone_11": _phone(414, 896, 2, _iphone("16_6")),
    "iphone_11_pro": _phone(375, 812, 3, _iphone("16_6")),
    "iphone_11_pro_max": _phone(414, 896, 3, _iphone("16_6")),
    "iphone_12_mini": _phone(375, 812, 3, _iphone("17_5")),
    "iphone_12": _phone(390, 844, 3, _iphone("17_5")),
    "iphone_12_pro": _phone(390, 844, 3, _iphone("17_5")),
    "iphone_13_mini": _phone(375, 812, 3, _iphone("17_5")),
    "iphone_13": _phone(390, 844, 3, _iphone("17_5")),
    "iphone_13_pro": _phone(390, 844, 3, _iphone("17_5")),
    "iphone_13_pro_max": _phone(428, 926, 3, _iphone("17_5")),
    "iphone_14": _phone(390, 844, 3, _iphone("17_5")),
    "iphone_14_pro": _phone(393, 852, 3, _iphone("17_5")),
    "iphone_14_pro_max": _phone(430, 932, 3, _iphone("17_5")),
    "iphone_15": _phone(393, 852, 3, _iphone("18_1")),
    "iphone_15_pro": _phone(393, 852, 3, _iphone("18_1")),
    "iphone_15_pro_max": _phone(430, 932, 3, _iphone("18_1")),
    "iphone_16": _phone(393, 852, 3, _iphone("18_1")),
    "iphone_16_pro": _phone(402, 874, 3, _iphone("18_1")),
    "iphone_16_pro_max": _phone(440, 956, 3, _iphone("18_1")),
    # Tablets
    "ipad": _phone(810, 1080, 2, _ipad("17_5")),
    "ipad_air": _phone(820, 1180, 2, _ipad("17_5")),
    "ipad_mini": _phone(744, 1133, 2, _ipad("17_5")),
    "ipad_pro_11": _phone(834, 1194, 2, _ipad("17_5")),
    "ipad_pro_12_9": _phone(1024, 1366, 2, _ipad("17_5")),
    # Pixel
    "pixel_5": _phone(393, 851, 2.75, _android("13", "Pixel 5")),
    "pixel_6": _phone(412, 915, 2.625, _android("14", "Pixel 6")),
    "pixel_7": _phone(412, 915, 2.625, _android("14", "Pixel 7")),
    "pixel_7_pro": _phone(412, 892, 2.625, _android("14", "Pixel 7 Pro")),
    "pixel_8": _phone(412, 915, 2.625, _android("14", "Pixel 8")),
    "pixel_8_pro": _phone(412, 892, 2.625, _android("14", "Pixel 8 Pro")),
    "pixel_9": _phone(412, 915, 2.625, _android("15", "Pixel 9")),
    "pixel_9_pro": _phone(412, 892, 2.625, _android("15", "Pixel 9 Pro")),
    "pixel_9_pro_fold": _phone(373, 839, 2.625, _android("15", "Pixel 9 Pro Fold")),
    # Galaxy
    "galaxy_s21": _phone(360, 800, 3, _android("13", "SM-G991B")),
    "galaxy_s22": _phone(360, 780, 3, _android("14", "SM-S901B")),
    "galaxy_s23": _phone(360, 780, 3, _android("14", "SM-S911B")),
    "galaxy_s24": _phone(360, 780, 3, _android("14", "SM-S921B")),
    "galaxy_s24_ultra": _phone(384, 824, 3, _android("14", "SM-S928B")),
    "galaxy_note_20": _phone(412, 883, 3, _android("13", "SM-N981B")),
    "galaxy_z_fold_5": _phone(373, 839, 3, _android("14", "SM-F946B")),
    "galaxy_z_flip_5": _phone(360, 780, 3, _android("14", "SM-F731B")),
    "galaxy_a54": _phone(412, 915, 2.625, _android("14", "SM-A546B")),
    "galaxy_tab_s9": _phone(800, 1280, 2, _android("14", "SM-X710", tablet=True)),
    "galaxy_tab_s9_ultra": _phone(1024, 1366, 2, _android("14", "SM-X910", tablet=True)),
    # Other Android
    "oneplus_12": _phone(412, 915, 3.5, _android("14", "CPH2581")),
    "xiaomi_14": _phone(393, 873, 3, _android("14", "23127PN0CG")),
    "kindle_fire_hdx": _phone(800, 1280, 2, KINDLE),
    # Surface
    "surface_pro_9": Device(1368, 912, 2, mobile=False, touch=True, user_agent=WINDOWS_CHROME),
    "surface_duo": _phone(540, 720, 2.5, _android("11", "Surface Duo")),
    # Desktop
    "desktop_hd": _desktop(1280, 720),
    "desktop_wxga": _desktop(1280, 800),
    "desktop_sxga": _desktop(1280, 1024),
    "desktop_1080p": _desktop(1920, 1080),
    "desktop_uxga": _desktop(1600, 1200),
    "desktop_wuxga": _desktop(1920, 1200),
    "desktop_1440p": _desktop(2560, 1440),
    "desktop_4k": _desktop(3840, 2160),
    # Laptops
    "laptop": _desktop(1366, 768),
    "macbook_air": _desktop(1440, 900, 2, MAC_CHROME),
    "macbook_air_15": _desktop(1710, 1112, 2, MAC_CHROME),
    "macbook_pro_14": _desktop(3024, 1964, 2, MAC_CHROME),
    "macbook_pro_16": _desktop(3456, 2234, 2, MAC_CHROME),
    "imac_24": _desktop(4480, 2520, 2, MAC_CHROME),
    # Social sizes: desktop rendering at the post's exact size.
    "social_instagram_post": _desktop(1080, 1080),
    "social_instagram_story": _desktop(1080, 1920),
    "social_twitter_post": _desktop(1200, 675),
    "social_facebook_post": _desktop(1200, 630),
    "social_linkedin_post": _desktop(1200, 627),
    "social_og_image": _desktop(1200, 630),
}


def _with_landscape(presets: dict[str, Device]) -> dict[str, Device]:
    """Add `<id>_landscape` for every portrait device (social sizes are formats, not devices)."""
    result = dict(presets)
    for name, device in presets.items():
        if device.height > device.width and not name.startswith("social_"):
            result[f"{name}_landscape"] = replace(
                device, width=device.height, height=device.width, landscape=True
            )
    return result


DEVICES: dict[str, Device] = _with_landscape(_PORTRAIT_AND_DESKTOP)
DEVICE_IDS: tuple[str, ...] = tuple(sorted(DEVICES))

def desktop_user_agent(chrome_major: str) -> str:
    """Chromium's own user agent without the "Headless" marker sites use to refuse bots."""
    return (f"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
            f"Chrome/{chrome_major}.0.0.0 Safari/537.36")


DEFAULT_WIDTH = 1280
DEFAULT_HEIGHT = 1024


@dataclass(frozen=True)
class Viewport:
    """The viewport a capture runs with, after preset and overrides are applied."""

    width: int = DEFAULT_WIDTH
    height: int = DEFAULT_HEIGHT
    scale: float = 1.0
    mobile: bool = False
    touch: bool = False
    landscape: bool = False
    user_agent: str | None = None

    def device_metrics(self) -> dict[str, Any]:
        """CDP `Emulation.setDeviceMetricsOverride` for this viewport: its size, scale and mobile mode, a screen
        of its size (CSS `device-width`, `screen.width`) and that screen's orientation."""
        landscape = self.width > self.height
        return {
            "width": self.width, "height": self.height, "deviceScaleFactor": self.scale, "mobile": self.mobile,
            "screenWidth": self.width, "screenHeight": self.height,
            # A phone held sideways is turned 90 degrees; a desktop's screen is landscape as it stands.
            "screenOrientation": {"type": "landscapePrimary", "angle": 90 if self.mobile else 0} if landscape
            else {"type": "portraitPrimary", "angle": 0},
        }


def resolve_viewport(
    *,
    device: str | None,
    width: int | None,
    height: int | None,
    scale: float | None,
    mobile: bool | None,
    touch: bool | None,
    landscape: bool | None,
    user_agent: str | None,
) -> Viewport:
    """Apply the preset, then every explicitly given parameter on top of it."""
    base = Viewport()
    if device is not None:
        preset = DEVICES[device]
        base = Viewport(preset.width, preset.height, preset.scale, preset.mobile, preset.touch,
                        preset.landscape, preset.user_agent)
    # The spec: `user_agent` is overridden by `viewport_device`.
    agent = base.user_agent if device is not None else user_agent
    final_width = width if width is not None else base.width
    final_height = height if height is not None else base.height
    if landscape is not None and landscape != (final_width > final_height) and final_width != final_height:
        # An explicit orientation turns the screen: `iphone_15` + `viewport_landscape=true` is 852x393.
        final_width, final_height = final_height, final_width
    return Viewport(
        width=final_width,
        height=final_height,
        scale=scale if scale is not None else base.scale,
        mobile=mobile if mobile is not None else base.mobile,
        touch=touch if touch is not None else base.touch,
        landscape=landscape if landscape is not None else base.landscape,
        user_agent=agent,
    )
