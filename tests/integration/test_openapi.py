"""The API's description as integrators use it: /docs and /redoc render in a real browser on a closed
network (nothing but the service reachable), and a client generated from /openapi.json by a maintained
generator (openapi-python-client, pinned in requirements.lock) authenticates, takes screenshots (GET and
POST), runs a bulk, reads usage and follows an async job against the running service."""

from __future__ import annotations

import base64
import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Route, sync_playwright

from animate.options import NOT_FOR_RECORDINGS
from render.browser.chromium import chromium_binary
from render.contract.options import TakeOptions
from render.settings import RenderSettings
from service.api.error_reference import ENTRIES
from tests.conftest import Org
from tests.support.images import decode
from tests.support.servers import RunningService
from tests.support.site import Site

pytestmark = pytest.mark.browser
BIN = Path(sys.executable).parent
# The generator reads one media type per answer; the capture routes answer several. Taking the first
# (image/png, the default format) as bytes is what its documentation suggests for binary answers.
GENERATOR_CONFIG = ("content_type_overrides:\n  image/png: application/octet-stream\n"
                    "  video/mp4: application/octet-stream\n")


def test_the_document_types_every_parameter_and_answer(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    take = spec["paths"]["/v1/screenshot/take"]
    query = {p["name"]: p for p in take["get"]["parameters"]}
    assert set(query) == {f.alias or n for n, f in TakeOptions.model_fields.items()} | {"signature"}
    assert {"type": "integer", "minimum": 1, "maximum": 16384}.items() <= query["viewport_width"]["schema"].items()
    # Defaults the model leaves unset (a preset may set them) are stated where client generators show them.
    for name, default in (("viewport_width", "1280"), ("viewport_height", "1024"), ("device_scale_factor", "1")):
        assert query[name]["description"].endswith(f"Default: {default}, unless viewport_device sets it."), name
        assert spec["components"]["schemas"]["TakeOptions"]["properties"][name]["description"] == \
            query[name]["description"]
    assert query["full_page"]["schema"]["type"] == "boolean" and query["full_page"]["schema"]["default"] is False
    assert "png" in query["format"]["schema"]["enum"] and query["format"]["schema"]["default"] == "png"
    assert query["hide_selectors"]["schema"]["type"] == "array" and query["hide_selectors"]["explode"] is True
    untyped = [name for name, p in query.items() if p["schema"].get("type", "string") == "string"
               and "enum" not in p["schema"]]
    assert len(untyped) < len(query) / 2  # free text: URLs, selectors, scripts; not numbers or choices
    body = spec["components"]["schemas"]["TakeOptions"]
    assert "access_key" in body["properties"] and body["additionalProperties"] is False
    animate = {p["name"] for p in spec["paths"]["/v1/screenshot/animate"]["get"]["parameters"]}
    assert not animate & NOT_FOR_RECORDINGS and "scenario" in animate
    assert not set(spec["components"]["schemas"]["AnimateOptions"]["properties"]) & NOT_FOR_RECORDINGS
    schemes = spec["components"]["securitySchemes"]
    assert {k: v for k, v in schemes["AccessKeyHeader"].items() if k != "description"} == {
        "type": "apiKey", "in": "header", "name": "X-Access-Key"}
    assert "400 access_key_required" in schemes["AccessKeyHeader"]["description"]  # the spec's refusal, not 401
    assert take["get"]["security"] and spec["paths"]["/healthz"]["get"]["security"] == []
    answers = take["get"]["responses"]
    assert {"image/png", "image/jpeg", "image/webp", "application/pdf", "text/markdown", "application/json"} <= set(
        answers["200"]["content"])
    assert {"202", "400", "500", "503"} <= set(answers)
    assert spec["components"]["schemas"]["Error"]["properties"]["error_code"]["enum"] == sorted(ENTRIES)
    assert "video/webm" in spec["paths"]["/v1/screenshot/animate"]["get"]["responses"]["200"]["content"]
    jobs = spec["paths"]["/v1/screenshot/jobs/{reference}"]["get"]["responses"]
    assert "404" in jobs and "422" not in jobs
    assert "422" not in json.dumps(spec["paths"])
    assert spec["paths"]["/v1/screenshot/bulk"]["post"]["requestBody"]["content"]["application/json"]["schema"]


def test_route_parameters_are_refused_with_the_error_body_not_422(client: httpx.Client) -> None:
    answer = client.get("/v1/screenshot/files/some-key", params={"expires": "soon", "signature": "x"})
    assert answer.status_code == 400
    assert answer.json()["error_code"] == "request_not_valid"
    assert [d["field"] for d in answer.json()["error_details"]] == ["expires"]


@pytest.mark.parametrize("route", ["/docs", "/redoc"])
def test_docs_render_offline(service: RunningService, route: str) -> None:
    """Chromium with every request outside the service refused, as on a closed network."""
    own = urlsplit(service.url).netloc
    outside: list[str] = []

    def closed_network(handle: Route) -> None:
        if urlsplit(handle.request.url).netloc == own:
            handle.continue_()
        else:
            outside.append(handle.request.url)
            handle.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_binary(RenderSettings().chromium_path),
                                             args=["--no-sandbox"] if os.geteuid() == 0 else [])
        try:
            page = browser.new_page()
            page.route("**/*", closed_network)
            page.goto(f"{service.url}{route}")
            if route == "/docs":
                page.wait_for_selector(".opblock-summary-path")
                paths = page.locator(".opblock-summary-path").all_text_contents()
            else:
                page.wait_for_selector("[data-section-id^='operation/']")
                paths = page.locator("[data-section-id^='operation/']").evaluate_all(
                    "sections => sections.map(s => s.dataset.sectionId)")
            text = page.locator("body").inner_text()
        finally:
            browser.close()
    assert outside == []
    if route == "/docs":
        assert "/v1/screenshot/take" in [p.replace("\u200b", "") for p in paths]
        assert "/v1/screenshot/bulk" in [p.replace("\u200b", "") for p in paths]
    else:
        assert "operation/take_get" in paths and "operation/bulk" in paths
    assert "Take a screenshot" in text


@pytest.fixture(scope="module")
def generated(service: RunningService, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The client openapi-python-client generates from the live document, importable."""
    folder = tmp_path_factory.mktemp("generated")
    (folder / "openapi.json").write_bytes(httpx.get(f"{service.url}/openapi.json").content)
    (folder / "config.yml").write_text(GENERATOR_CONFIG)
    run = subprocess.run(
        [BIN / "openapi-python-client", "generate", "--path", "openapi.json", "--config", "config.yml",
         "--meta", "none", "--output-path", "screenshot_service_client"],
        cwd=folder, capture_output=True, text=True, env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Warning" not in run.stdout + run.stderr, run.stdout + run.stderr  # every operation understood
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module("screenshot_service_client")
    finally:
        sys.path.remove(str(folder))
        for name in [name for name in sys.modules if name.startswith("screenshot_service_client")]:
            del sys.modules[name]


def _api(name: str) -> Any:
    return importlib.import_module(f"screenshot_service_client.api.{name}")


def _models() -> Any:
    return importlib.import_module("screenshot_service_client.models")


def test_a_generated_client_takes_bulks_reads_usage_and_follows_jobs(
        generated: ModuleType, service: RunningService, make_org: Any, site: Site) -> None:
    org: Org = make_org(quota=100)
    with generated.AuthenticatedClient(base_url=service.url, token=org.access_key, prefix="",
                                       auth_header_name="X-Access-Key", timeout=httpx.Timeout(60)) as client, \
            generated.Client(base_url=service.url) as unauthenticated:
        calls(client, unauthenticated, site)


def calls(client: Any, unauthenticated: Any, site: Site) -> None:
    take_get, take_post, bulk = _api("capture.take_get"), _api("capture.take_post"), _api("capture.bulk")
    job_status, usage = _api("capture.job_status"), _api("account.usage")
    models = _models()
    page = site.url("/colours.html")

    # GET with typed parameters: the image is what was asked for.
    answer = take_get.sync_detailed(client=client, url_query=page, viewport_width=320, viewport_height=200,
                                    format_=models.TakeGetFormat.JPEG)
    assert answer.status_code == 200 and answer.headers["content-type"] == "image/jpeg"
    image = decode(answer.content)
    assert (image.width, image.height) == (320, 200)

    # POST with the body model (the generated model sends every default: each must be accepted, of its JSON
    # type). A body parameter may be null (left out), so the generator names its enum "...Type0".
    options = models.TakeOptions(html="<body style='margin:0;background:#00ff00'></body>", viewport_width=64,
                                 viewport_height=48, response_type=models.TakeOptionsResponseTypeType0.JSON)
    answer = take_post.sync_detailed(client=client, body=options)
    assert answer.status_code == 200, answer.content
    result = json.loads(answer.content)
    assert result["is_successful"] is True and result["format"] == "png" and result["screenshot_url"]
    stored = decode(httpx.get(result["screenshot_url"]).content)
    assert (stored.width, stored.height) == (64, 48) and stored.getpoint(10, 10)[:3] == [0, 255, 0]

    # A refusal comes back as the typed error body.
    refused = take_get.sync_detailed(client=client, url_query=page, viewport_width=320, clip_x=5)
    assert refused.status_code == 400
    assert isinstance(refused.parsed, models.Error) and refused.parsed.error_code == "request_not_valid"

    # Bulk, executed: each entry's bytes are the capture.
    entries = [models.BulkEntry(url=page, viewport_width=width, viewport_height=100) for width in (100, 200)]
    answered = bulk.sync(client=client, body=models.BulkRequest(requests=entries, execute=True))
    assert isinstance(answered, list) and len(answered) == 2
    widths = [decode(base64.b64decode(entry.response.body)).width for entry in answered]
    assert widths == [100, 200] and all(entry.response.status == 200 for entry in answered)

    # Async: 202 with a reference, then the job's state until done.
    accepted = take_get.sync(client=client, url_query=page, async_=True, response_type=models.TakeGetResponseType.JSON)
    assert isinstance(accepted, models.Accepted) and accepted.reference
    deadline = time.monotonic() + 60
    state = job_status.sync(client=client, reference=accepted.reference)
    while isinstance(state, models.Job) and state.status in (models.JobStatus.QUEUED, models.JobStatus.RENDERING):
        assert time.monotonic() < deadline, "the async job did not finish"
        time.sleep(0.2)
        state = job_status.sync(client=client, reference=accepted.reference)
    assert isinstance(state, models.Job) and state.status == models.JobStatus.DONE
    missing = job_status.sync_detailed(client=client, reference="no-such-job")
    assert missing.status_code == 404 and isinstance(missing.parsed, models.Error)

    # Usage counts what succeeded: two takes, two bulk entries, one async job.
    counted = usage.sync(client=client)
    assert isinstance(counted, models.Usage) and (counted.total, counted.used) == (100, 5)
    assert usage.sync_detailed(client=unauthenticated).parsed.error_code == "access_key_required"
