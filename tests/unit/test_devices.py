"""Device presets: every id of the spec, its landscape variant, and override rules."""

from __future__ import annotations

import pytest

from render.contract.devices import DEVICES, resolve_viewport
from render.contract.options import parse_take_options

SPEC_PRESETS = {
    "iphone_se": (375, 667, 2), "iphone_xr": (414, 896, 2), "iphone_11": (414, 896, 2),
    "iphone_11_pro": (375, 812, 3), "iphone_11_pro_max": (414, 896, 3), "iphone_12_mini": (375, 812, 3),
    "iphone_12": (390, 844, 3), "iphone_12_pro": (390, 844, 3), "iphone_13_mini": (375, 812, 3),
    "iphone_13": (390, 844, 3), "iphone_13_pro": (390, 844, 3), "iphone_13_pro_max": (428, 926, 3),
    "iphone_14": (390, 844, 3), "iphone_14_pro": (393, 852, 3), "iphone_14_pro_max": (430, 932, 3),
    "iphone_15": (393, 852, 3), "iphone_15_pro": (393, 852, 3), "iphone_15_pro_max": (430, 932, 3),
    "iphone_16": (393, 852, 3), "iphone_16_pro": (402, 874, 3), "iphone_16_pro_max": (440, 956, 3),
    "ipad": (810, 1080, 2), "ipad_air": (820, 1180, 2), "ipad_mini": (744, 1133, 2),
    "ipad_pro_11": (834, 1194, 2), "ipad_pro_12_9": (1024, 1366, 2),
    "pixel_5": (393, 851, 2.75), "pixel_6": (412, 915, 2.625), "pixel_7": (412, 915, 2.625),
    "pixel_7_pro": (412, 892, 2.625), "pixel_8": (412, 915, 2.625), "pixel_8_pro": (412, 892, 2.625),
    "pixel_9": (412, 915, 2.625), "pixel_9_pro": (412, 892, 2.625), "pixel_9_pro_fold": (373, 839, 2.625),
    "galaxy_s21": (360, 800, 3), "galaxy_s22": (360, 780, 3), "galaxy_s23": (360, 780, 3),
    "galaxy_s24": (360, 780, 3), "galaxy_s24_ultra": (384, 824, 3), "galaxy_note_20": (412, 883, 3),
    "galaxy_z_fold_5": (373, 839, 3), "galaxy_z_flip_5": (360, 780, 3), "galaxy_a54": (412, 915, 2.625),
    "galaxy_tab_s9": (800, 1280, 2), "galaxy_tab_s9_ultra": (1024, 1366, 2),
    "oneplus_12": (412, 915, 3.5), "xiaomi_14": (393, 873, 3), "kindle_fire_hdx": (800, 1280, 2),
    "surface_pro_9": (1368, 912, 2), "surface_duo": (540, 720, 2.5),
    "desktop_hd": (1280, 720, 1), "desktop_wxga": (1280, 800, 1), "desktop_sxga": (1280, 1024, 1),
    "desktop_1080p": (1920, 1080, 1), "desktop_uxga": (1600, 1200, 1), "desktop_wuxga": (1920, 1200, 1),
    "desktop_1440p": (2560, 1440, 1), "desktop_4k": (3840, 2160, 1),
    "laptop": (1366, 768, 1), "macbook_air": (1440, 900, 2), "macbook_air_15": (1710, 1112, 2),
    "macbook_pro_14": (3024, 1964, 2), "macbook_pro_16": (3456, 2234, 2), "imac_24": (4480, 2520, 2),
    "social_instagram_post": (1080, 1080, 1), "social_instagram_story": (1080, 1920, 1),
    "social_twitter_post": (1200, 675, 1), "social_facebook_post": (1200, 630, 1),
    "social_linkedin_post": (1200, 627, 1), "social_og_image": (1200, 630, 1),
}
PORTRAIT_DEVICES = [name for name, (w, h, _) in SPEC_PRESETS.items() if h > w and not name.startswith("social_")]


@pytest.mark.parametrize("name", sorted(SPEC_PRESETS))
def test_every_spec_preset_has_its_size_and_scale(name: str) -> None:
    width, height, scale = SPEC_PRESETS[name]
    device = DEVICES[name]
    assert (device.width, device.height, device.scale) == (width, height, scale)
    assert device.user_agent


@pytest.mark.parametrize("name", sorted(PORTRAIT_DEVICES))
def test_every_portrait_device_has_a_landscape_variant(name: str) -> None:
    portrait, landscape = DEVICES[name], DEVICES[f"{name}_landscape"]
    assert (landscape.width, landscape.height) == (portrait.height, portrait.width)
    assert landscape.landscape and not portrait.landscape
    assert (landscape.scale, landscape.mobile, landscape.touch) == (portrait.scale, portrait.mobile,
                                                                    portrait.touch)


def test_phone_presets_are_mobile_touch_desktops_are_not() -> None:
    assert DEVICES["iphone_15"].mobile and DEVICES["iphone_15"].touch
    assert "iPhone" in DEVICES["iphone_15"].user_agent
    assert "Android" in DEVICES["pixel_8"].user_agent
    assert not DEVICES["desktop_1080p"].mobile and not DEVICES["desktop_1080p"].touch


def test_explicit_parameters_override_the_preset() -> None:
    options = parse_take_options({"url": "https://example.com", "viewport_device": "iphone_15",
                                  "viewport_width": "500", "device_scale_factor": "1"})
    viewport = options.viewport
    assert (viewport.width, viewport.height, viewport.scale, viewport.mobile) == (500, 852, 1, True)


def test_viewport_device_overrides_user_agent() -> None:
    viewport = resolve_viewport(device="pixel_8", width=None, height=None, scale=None, mobile=None,
                                touch=None, landscape=None, user_agent="MyAgent/1.0")
    assert viewport.user_agent is not None and "Pixel 8" in viewport.user_agent


@pytest.mark.parametrize(("params", "size"), [
    ({"viewport_device": "iphone_15", "viewport_landscape": "true"}, (852, 393)),
    ({"viewport_device": "iphone_15_landscape", "viewport_landscape": "false"}, (393, 852)),
    ({"viewport_width": "400", "viewport_height": "800", "viewport_landscape": "true"}, (800, 400)),
    ({"viewport_landscape": "true"}, (1280, 1024)),
    ({"viewport_landscape": "false"}, (1024, 1280)),
], ids=["preset-turned", "landscape-preset-turned-back", "explicit-size", "already-landscape", "portrait"])
def test_viewport_landscape_turns_the_screen(params: dict[str, str], size: tuple[int, int]) -> None:
    viewport = parse_take_options({"url": "https://example.com", **params}).viewport
    assert (viewport.width, viewport.height) == size
