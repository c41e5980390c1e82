"""Access keys and signed requests (docs/using.md, Keys, quotas and signed requests), through the HTTP API."""

from __future__ import annotations

import hashlib
import hmac
import json
from urllib.parse import quote

import httpx
import pytest

from service.signatures import canonical_message
from tests.conftest import Org
from tests.support.site import Site

pytestmark = pytest.mark.browser


def sign(message: str, key: str) -> str:
    return hmac.new(key.encode(), message.encode(), hashlib.sha256).hexdigest()


def error_code(response: httpx.Response) -> str:
    return str(response.json()["error_code"])


def test_key_is_required(client: httpx.Client, site: Site) -> None:
    response = client.get("/v1/screenshot/take", params={"url": site.url("/colours.html")})
    assert response.status_code == 400 and error_code(response) == "access_key_required"
    assert "X-Access-Key" in response.json()["error_message"]


def test_key_in_header_query_or_body(client: httpx.Client, org: Org, site: Site) -> None:
    url = site.url("/colours.html")
    params = {"url": url, "response_type": "empty"}
    assert client.get("/v1/screenshot/take", params=params, headers={"X-Access-Key": org.access_key}).status_code == 200
    assert client.get("/v1/screenshot/take", params={**params, "access_key": org.access_key}).status_code == 200
    assert client.post("/v1/screenshot/take", json={**params, "access_key": org.access_key}).status_code == 200


def test_invalid_and_revoked_keys(client: httpx.Client, org: Org, site: Site, service) -> None:  # type: ignore[no-untyped-def]
    response = client.get("/v1/screenshot/take", params={"url": site.url("/colours.html"), "access_key": "nope"})
    assert response.status_code == 400 and error_code(response) == "access_key_invalid"
    import subprocess
    import sys

    revoked = subprocess.run([sys.executable, "-m", "service.cli", "keys", "revoke", org.access_key], env=service.env,
                             capture_output=True, text=True, check=True)
    assert "revoked organisation" in revoked.stdout
    response = client.get("/v1/screenshot/usage", params={"access_key": org.access_key})
    assert response.status_code == 400 and error_code(response) == "access_key_invalid"


def test_valid_signatures_pass_in_both_forms(client: httpx.Client, make_org, site: Site) -> None:  # type: ignore[no-untyped-def]
    org = make_org(require_signature=True)
    url = site.url("/colours.html")
    pairs = [("url", url), ("access_key", org.access_key), ("viewport_width", "300"), ("viewport_height", "200")]
    canonical = sign(canonical_message(pairs), org.signing_key)
    response = client.get("/v1/screenshot/take", params=[*pairs, ("signature", canonical)])
    assert response.status_code == 200, response.text
    raw_query = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in pairs)
    as_sent = sign(raw_query, org.signing_key)
    response = client.get(f"/v1/screenshot/take?{raw_query}&signature={as_sent}")
    assert response.status_code == 200, response.text
    body = {"url": url, "access_key": org.access_key, "viewport_width": 300, "device_scale_factor": 1.0,
            "omit_background": False}
    message = canonical_message([(k, json.dumps(v) if not isinstance(v, str) else v) for k, v in body.items()])
    assert "device_scale_factor=1.0" in message and "omit_background=false" in message
    response = client.post("/v1/screenshot/take", json={**body, "signature": sign(message, org.signing_key)})
    assert response.status_code == 200, response.text


def test_enforced_signatures(client: httpx.Client, make_org, site: Site) -> None:  # type: ignore[no-untyped-def]
    org = make_org(require_signature=True)
    params = {"url": site.url("/colours.html"), "access_key": org.access_key}
    unsigned = client.get("/v1/screenshot/take", params=params)
    assert unsigned.status_code == 400 and error_code(unsigned) == "signature_is_required"
    wrong = client.get("/v1/screenshot/take", params={**params, "signature": "0" * 64})
    assert wrong.status_code == 400 and error_code(wrong) == "signature_is_not_valid"
    tampered_pairs = list(params.items())
    good = sign(canonical_message(tampered_pairs), org.signing_key)
    tampered = client.get("/v1/screenshot/take", params={**params, "format": "jpeg", "signature": good})
    assert tampered.status_code == 400 and error_code(tampered) == "signature_is_not_valid"


def test_signature_is_checked_even_without_enforcement(client: httpx.Client, org: Org, site: Site) -> None:
    response = client.get("/v1/screenshot/take", params={"url": site.url("/colours.html"),
                                                         "access_key": org.access_key, "signature": "bad"})
    assert response.status_code == 400 and error_code(response) == "signature_is_not_valid"
