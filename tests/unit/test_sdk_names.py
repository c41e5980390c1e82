"""The names the hosted API's official SDKs send for parameters of ours (render.contract.options.SDK_ALIASES)."""

from __future__ import annotations

import pytest

from animate.options import parse_animate_options
from render.contract.errors import RequestNotValid
from render.contract.options import parse_take_options

SECRET = "sk-test-do-not-echo-1234"


def test_the_sdks_names_set_our_parameters() -> None:
    options = parse_take_options({"url": "https://example.com", "openai_api_key": SECRET, "vision_prompt": "What?"})
    assert options.vision_provider_api_key == SECRET
    # reduce_motion is a parameter of its own now (not reduced_motion), on /animate too.
    animated = parse_animate_options({"url": "https://example.com", "reduce_motion": "true"})
    assert animated.reduce_motion and not animated.reduced_motion


def test_both_names_at_once_are_refused_naming_the_field_not_the_secret() -> None:
    with pytest.raises(RequestNotValid) as refused:
        parse_take_options({"url": "https://example.com", "openai_api_key": SECRET,
                            "vision_provider_api_key": SECRET})
    assert [detail.field for detail in refused.value.details] == ["openai_api_key"]
    assert SECRET not in str(refused.value) and "vision_provider_api_key" in str(refused.value)
