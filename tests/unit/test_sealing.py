"""Credentials cross the queue sealed (render/contract/sealing.py): split from the options, opened only with the same
secret for the same job."""

from __future__ import annotations

import pytest

from render.contract import sealing
from render.contract.errors import RequestNotValid
from render.contract.options import TakeOptions, parse_take_options
from render.page.request_context import without_url_credentials


def test_credentials_are_split_from_what_may_be_stored() -> None:
    options = parse_take_options({
        "url": "https://user:p%40ss@example.com/private?q=1", "cookies": ["sid=1"], "headers": ["X-Key: k"],
        "authorization": "Bearer t", "proxy": "http://u:pw@proxy.example:3128/", "format": "webp"})
    public, secrets = sealing.split_secrets(options.to_payload())
    assert public == {"url": "https://example.com/private?q=1", "format": "webp"}
    assert secrets == {"url": "https://user:p%40ss@example.com/private?q=1", "cookies": ["sid=1"],
                       "headers": ["X-Key: k"], "authorization": "Bearer t",
                       "proxy": "http://u:pw@proxy.example:3128/"}
    assert sealing.split_secrets({"url": "https://example.com/a@b"}) == ({"url": "https://example.com/a@b"}, {})


def test_sealed_secrets_open_only_for_their_job_and_secret() -> None:
    token = sealing.seal_secrets({"cookies": ["sid=1"]}, "secret-a", "job-1")
    assert b"sid=1" not in token.encode()
    assert sealing.unseal_secrets(token, "secret-a", "job-1") == {"cookies": ["sid=1"]}
    for secret, reference in [("secret-b", "job-1"), ("secret-a", "job-2")]:
        with pytest.raises(sealing.Unsealable):
            sealing.unseal_secrets(token, secret, reference)
    with pytest.raises(sealing.Unsealable):
        sealing.unseal_secrets("not a token", "secret-a", "job-1")


def test_one_token_carries_every_secret_of_a_job_and_opens_only_for_it() -> None:
    options = parse_take_options({"url": "https://example.com/", "cookies": ["sid=1"], "format": "webp",
                                  "vision_provider_api_key": "sk-live-123", "vision_prompt": "What is shown?"})
    public, token = sealing.seal_job(options, "secret-a", "job-1")
    assert public == {"url": "https://example.com/", "format": "webp"}
    assert token is not None and "sk-live-123" not in token and "sid=1" not in token and "What" not in token
    opened = TakeOptions.model_validate(sealing.open_job(public, token, "secret-a", "job-1"))
    assert (opened.cookies, opened.vision_provider_api_key, opened.vision_prompt) == (
        ["sid=1"], "sk-live-123", "What is shown?")
    for secret, reference in (("secret-b", "job-1"), ("secret-a", "job-2")):
        with pytest.raises(RequestNotValid) as caught:
            sealing.open_job(public, token, secret, reference)
        assert "SCREENSHOT_JOB_SECRET" in caught.value.message and "vision" in caught.value.message


def test_a_server_without_a_job_secret_refuses_secrets_naming_them() -> None:
    options = parse_take_options({"url": "https://example.com/", "authorization": "Bearer t",
                                  "vision_provider_api_key": "sk-live-123", "vision_max_tokens": 20})
    with pytest.raises(RequestNotValid) as caught:
        sealing.seal_job(options, "", "job-1")
    assert [detail.field for detail in caught.value.details] == ["authorization", "vision_provider_api_key"]
    assert "sk-live-123" not in caught.value.message and "Bearer" not in caught.value.message
    plain = parse_take_options({"url": "https://example.com/"})
    assert sealing.seal_job(plain, "", "job-1") == ({"url": "https://example.com/"}, None)
    assert sealing.open_job({"url": "https://example.com/"}, None, "", "job-1") == {"url": "https://example.com/"}


@pytest.mark.parametrize(("url", "authorization", "expected"), [
    ("http://user:pass@example.com/a", None, ("http://example.com/a", "Basic dXNlcjpwYXNz")),
    ("http://us%3Aer:p%40ss@example.com:8080/", None, ("http://example.com:8080/", "Basic dXM6ZXI6cEBzcw==")),
    ("http://user@example.com/", None, ("http://example.com/", "Basic dXNlcjo=")),
    ("http://user:pass@example.com/", "Bearer x", ("http://example.com/", "Bearer x")),
    ("http://example.com/", None, ("http://example.com/", None)),
], ids=["user-password", "encoded", "user-only", "explicit-wins", "none"])
def test_url_credentials_become_an_authorization(url: str, authorization: str | None,
                                                 expected: tuple[str, str | None]) -> None:
    params = {"url": url, **({"authorization": authorization} if authorization else {})}
    moved = without_url_credentials(parse_take_options(params))
    assert (moved.url, moved.authorization) == expected


def test_pdf_passwords_travel_sealed() -> None:
    options = parse_take_options({"url": "https://example.com/", "format": "pdf", "pdf_user_password": "open me",
                                  "pdf_owner_password": "own me", "pdf_permissions": ["print"]})
    public, token = sealing.seal_job(options, "secret-a", "job-1")
    assert "pdf_user_password" not in public and "pdf_owner_password" not in public
    assert public["pdf_permissions"] == ["print"]
    opened = TakeOptions.model_validate(sealing.open_job(public, token, "secret-a", "job-1"))
    assert (opened.pdf_user_password, opened.pdf_owner_password) == ("open me", "own me")
