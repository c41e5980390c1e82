"""The provider call's failures that need no browser (the key's sealing: tests/unit/test_sealing.py)."""

from __future__ import annotations

import json
import time

import pytest

from render.contract.errors import CaptureTimeout, NetworkError, RequestNotValid
from render.output import vision
from tests.support.receivers import Received, Receiver
from tests.support.servers import free_port


@pytest.mark.parametrize("key", ["clé-été", "two words", "", "tab\there"])
def test_a_key_that_cannot_travel_in_a_header_is_refused_naming_it(key: str) -> None:
    from render.contract.options import parse_take_options

    with pytest.raises(RequestNotValid) as caught:
        parse_take_options({"url": "https://example.com", "vision_provider_api_key": key})
    assert caught.value.details[0].field == "vision_provider_api_key"


def ask(base_url: str, timeout: float = 5) -> str:
    return vision.ask(b"\x89PNG", "image/png", None, None, api_key="k", base_url=base_url, model="m",
                      deadline=time.time() + 30, timeout=timeout)


def test_an_unreachable_provider_is_a_network_error() -> None:
    with pytest.raises(NetworkError) as caught:
        ask(f"http://127.0.0.1:{free_port()}/v1")
    assert "vision provider" in caught.value.message


def test_a_provider_that_hangs_is_cut_at_the_timeout() -> None:
    def hang(received: Received) -> tuple[int, dict[str, str], bytes]:
        time.sleep(3)
        return 200, {}, b"{}"

    with Receiver(hang) as provider, pytest.raises(CaptureTimeout):
        ask(provider.url("/v1"), timeout=0.5)


def test_content_parts_and_malformed_answers() -> None:
    parts = {"choices": [{"message": {"content": [{"type": "text", "text": "a "}, {"type": "text", "text": "b"}]}}]}
    with Receiver(lambda r: (200, {}, json.dumps(parts).encode())) as provider:
        assert ask(provider.url("/v1")) == "a b"
        assert provider.requests[0].path == "/v1/chat/completions"
    with Receiver(lambda r: (200, {}, b'{"choices": []}')) as provider, pytest.raises(NetworkError):
        ask(provider.url("/v1"))


def test_a_structured_answer_is_checked_against_its_schema() -> None:
    from render.contract.errors import VisionResponseInvalid
    from render.output.vision import structured

    schema = {"type": "object", "required": ["price"], "properties": {"price": {"type": "number", "minimum": 0}},
              "additionalProperties": False}
    assert structured('{"price": 19.99}', schema) == '{"price": 19.99}'
    for answer, where in (('{"price": -1}', "at price: -1 is less than the minimum of 0"),
                          ('{"cost": 1}', "at the answer:"), ("The price is 19.99.", "is not JSON")):
        with pytest.raises(VisionResponseInvalid) as raised:
            structured(answer, schema)
        assert where in raised.value.message, raised.value.message
