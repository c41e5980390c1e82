"""Health, readiness, metrics and docs."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import Org
from tests.site import Site

pytestmark = pytest.mark.browser


def test_health_and_readiness(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["redis"] is True and ready.json()["workers"] >= 1


def test_metrics_count_requests_by_route_and_code(client: httpx.Client, org: Org, site: Site) -> None:
    client.get("/v1/screenshot/take", params={"access_key": org.access_key, "url": site.url("/colours.html"),
                                               "response_type": "empty"})
    client.get("/v1/screenshot/take", params={"url": site.url("/colours.html")})
    text = client.get("/metrics").text
    assert 'screenshot_requests_total{code="ok",route="/v1/screenshot/take"}' in text
    assert 'screenshot_requests_total{code="access_key_required",route="/v1/screenshot/take"}' in text
    assert "screenshot_render_seconds_bucket" in text
    assert "screenshot_queue_depth" in text
    assert org.access_key not in text


def test_docs_and_openapi_list_every_take_parameter(client: httpx.Client) -> None:
    from render.options import TakeOptions

    assert client.get("/docs").status_code == 200
    spec = client.get("/openapi.json").json()
    take = spec["paths"]["/v1/screenshot/take"]
    names = {p["name"] for p in take["get"]["parameters"]}
    assert names == {f.alias or n for n, f in TakeOptions.model_fields.items()}
    body_schema = take["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert "viewport_device" in body_schema["properties"]
