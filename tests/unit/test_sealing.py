"""Credentials cross the queue sealed (render/sealing.py): split from the options, opened only with the same
secret for the same job."""

from __future__ import annotations

import pytest

from render import sealing
from render.options import parse_take_options
from render.request_context import without_url_credentials


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
