"""AI vision against a local server speaking OpenAI's chat-completions protocol: the final image goes
out, the completion comes back in JSON and header, provider errors map to clear errors (not charged),
and the caller's key is found nowhere: not in Redis (job payloads included), not in any log line."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest
import redis

from service.settings import default_workers
from tests.conftest import Org
from tests.support.receivers import VISION_KEYS, Receiver, vision_answer
from tests.support.servers import RunningService, running_service, wait_for
from tests.support.site import Site

pytestmark = pytest.mark.browser

COMPLETION_HEADER = "x-service-vision-completion"


@pytest.fixture(scope="module")
def provider() -> Iterator[Receiver]:
    with Receiver(vision_answer) as running:
        yield running


@pytest.fixture(scope="module")
def log_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("vision-logs") / "service.log"


@pytest.fixture(scope="module")
def isolated(redis_url: str, provider: Receiver, log_path: Path, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[RunningService]:
    own_database = redis_url.rsplit("/", 1)[0] + "/5"
    with log_path.open("wb") as log, running_service(
            own_database, tmp_path_factory.mktemp("vision-service"), workers=default_workers(), log=log,
            SCREENSHOT_VISION_BASE_URL=provider.url("/v1"), SCREENSHOT_VISION_MODEL="test-vision-1",
            SCREENSHOT_LOG_LEVEL="DEBUG") as running:
        yield running


def take(http: httpx.Client, org: Org, site: Site, **params: str) -> httpx.Response:
    return http.get("/v1/screenshot/take", params={
        "access_key": org.access_key, "url": site.url("/colours.html"), "viewport_width": "200",
        "viewport_height": "100", **params})


def used(http: httpx.Client, org: Org) -> int:
    return int(http.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"])


def test_the_final_image_is_described_in_the_header(isolated_http: httpx.Client, isolated_org: Org,
                                                    site: Site) -> None:
    response = take(isolated_http, isolated_org, site, vision_provider_api_key="sk-test-good",
                    vision_prompt="What colour is the middle?", vision_max_tokens="50")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    completion = unquote(response.headers[COMPLETION_HEADER])
    # The bottom half of /colours.html is blue: the centre pixel of the 200x100 shot.
    assert completion == ("Vu: image/png 200×100, centre [0, 0, 255], prompt «What colour is the middle?», "
                          "max_tokens 50, model test-vision-1")
    assert used(isolated_http, isolated_org) == 1


def test_json_carries_the_completion_of_the_resized_image(isolated_http: httpx.Client, isolated_org: Org,
                                                          site: Site) -> None:
    response = take(isolated_http, isolated_org, site, vision_provider_api_key="sk-test-good",
                    response_type="json", image_width="100", format="avif")
    assert response.status_code == 200, response.text
    completion = response.json()["vision"]["completion"]
    # AVIF is not a format providers take: the same pixels go as PNG; the default prompt is used.
    assert completion.startswith("Vu: image/png 100×50, centre [")
    assert "prompt «Describe this screenshot.», max_tokens None" in completion
    assert unquote(response.headers[COMPLETION_HEADER]) == completion


SCHEMA = {"type": "object", "additionalProperties": False, "required": ["width", "height", "centre"],
          "properties": {"width": {"type": "integer", "minimum": 1}, "height": {"type": "integer", "minimum": 1},
                         "centre": {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 3}}}


def test_a_structured_answer_follows_the_schema(isolated_http: httpx.Client, isolated_org: Org, site: Site,
                                                provider: Receiver) -> None:
    """The schema goes to the provider as structured output (response_format json_schema, strict) and its
    answer, checked against it, comes back as text and as JSON; a schema in a query string is its JSON text."""
    response = isolated_http.post("/v1/screenshot/take", json={
        "access_key": isolated_org.access_key, "url": site.url("/colours.html"), "viewport_width": 200,
        "viewport_height": 100, "response_type": "json", "vision_provider_api_key": "sk-test-good",
        "vision_response_schema": SCHEMA})
    assert response.status_code == 200, response.text
    vision = response.json()["vision"]
    assert vision["response"] == {"width": 200, "height": 100, "centre": [0, 0, 255]}
    assert json.loads(vision["completion"]) == vision["response"]
    sent = provider.to("/v1/chat/completions")[-1].json()["response_format"]
    assert sent == {"type": "json_schema", "json_schema": {"name": "screenshot_answer", "schema": SCHEMA,
                                                           "strict": True}}
    by_query = take(isolated_http, isolated_org, site, vision_provider_api_key="sk-test-good",
                    vision_response_schema=json.dumps(SCHEMA))
    assert by_query.status_code == 200 and json.loads(unquote(by_query.headers[COMPLETION_HEADER]))["width"] == 200


@pytest.mark.parametrize(("key", "where"), [("sk-test-off-schema", "at width: '200' is not of type 'integer'"),
                                            ("sk-test-prose", "is not JSON")])
def test_an_answer_outside_the_schema_is_a_clear_error_not_charged(isolated_http: httpx.Client, make_org_in,  # type: ignore[no-untyped-def]
                                                                   isolated: RunningService, site: Site, key: str,
                                                                   where: str) -> None:
    org = make_org_in(isolated.redis_url)
    response = take(isolated_http, org, site, vision_provider_api_key=key,
                    vision_response_schema=json.dumps(SCHEMA))
    assert response.status_code == 500, response.text
    body = response.json()
    assert body["error_code"] == "vision_response_invalid" and where in body["error_message"], body
    assert key not in response.text
    assert used(isolated_http, org) == 0


@pytest.mark.parametrize(("key", "status", "code", "field"), [
    ("sk-test-revoked", 400, "request_not_valid", "vision_provider_api_key"),
    ("sk-test-bad-request", 400, "request_not_valid", "vision_prompt"),
    ("sk-test-limited", 503, "temporary_unavailable", None),
    ("sk-test-broken", 500, "network_error", None),
])
def test_provider_errors_are_clear_and_not_charged(isolated_http: httpx.Client, isolated_org: Org, site: Site,
                                                   key: str, status: int, code: str, field: str | None) -> None:
    response = take(isolated_http, isolated_org, site, vision_provider_api_key=key)
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error_code"] == code
    assert f"HTTP {VISION_KEYS[key]}" in body["error_message"]
    assert f"test provider says {VISION_KEYS[key]}" in body["error_message"]
    assert key not in response.text
    if field is not None:
        assert [d["field"] for d in body["error_details"]] == [field]
    assert used(isolated_http, isolated_org) == 0


@pytest.mark.parametrize(("params", "field"), [
    ({"vision_prompt": "hello"}, "vision_prompt"),
    ({"vision_max_tokens": "20"}, "vision_max_tokens"),
    ({"vision_provider_api_key": "sk-test-good", "format": "pdf"}, "vision_provider_api_key"),
    ({"vision_provider_api_key": "sk-test-good", "vision_max_tokens": "0"}, "vision_max_tokens"),
    ({"vision_response_schema": '{"type": "object"}'}, "vision_response_schema"),
    ({"vision_provider_api_key": "sk-test-good", "vision_response_schema": "{not json"}, "vision_response_schema"),
    ({"vision_provider_api_key": "sk-test-good", "vision_response_schema": '{"type": "bogus"}'},
     "vision_response_schema"),
    ({"vision_provider_api_key": "sk-test-good", "vision_response_schema": "[1, 2]"}, "vision_response_schema"),
])
def test_bad_vision_parameters_name_the_field(isolated_http: httpx.Client, isolated_org: Org, site: Site,
                                              params: dict[str, str], field: str) -> None:
    response = take(isolated_http, isolated_org, site, **params)
    assert response.status_code == 400
    assert response.json()["error_code"] == "request_not_valid"
    assert field in [d["field"] for d in response.json()["error_details"]]


# --- schemas that must never fetch, loop or backtrack --------------------------------------


def _nested(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"v": schema}}
    return schema


@pytest.fixture(scope="module")
def canary() -> Iterator[Receiver]:
    """Answers any schema a worker might fetch (it must never be asked)."""
    answer = (200, {"Content-Type": "application/schema+json"}, b'{"type": "string"}')
    with Receiver(lambda received: answer) as running:
        yield running


def _fetching_schemas(canary: Receiver) -> list[dict]:
    return [
        {"type": "object", "properties": {"v": {"$ref": canary.url("/schema.json")}}},
        {"$id": canary.url("/root.json"), "type": "object", "properties": {"v": {"$ref": "schema.json"}}},
        {"type": "object", "properties": {"v": {"$dynamicRef": canary.url("/schema.json#meta")}}},
        {"type": "object", "$defs": {"a": {"$ref": canary.url("/schema.json#/$defs/b")}}, "$ref": "#/$defs/a"},
    ]


BAD_SCHEMAS = {
    "nested-150": _nested(150),
    "self": {"$ref": "#"},
    "defs-loop": {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"},
    "unresolvable": {"type": "object", "properties": {"v": {"$ref": "#/$defs/missing"}}},
    "back-reference": {"type": "string", "pattern": "(a)\\1"},
    "look-ahead": {"type": "object", "patternProperties": {"(?=x)x": {"type": "string"}}},
    "not-a-pattern": {"type": "string", "pattern": "(unclosed"},
}


def _with_schema(http: httpx.Client, org: Org, site: Site, schema: dict, how: str) -> httpx.Response:
    """A capture asking for a structured answer, the schema as a query string's JSON text or in a JSON body."""
    params = {"access_key": org.access_key, "url": site.url("/colours.html"), "viewport_width": 200,
              "viewport_height": 100, "vision_provider_api_key": "sk-test-good"}
    if how == "query":
        return http.get("/v1/screenshot/take", params={**params, "vision_response_schema": json.dumps(schema)})
    return http.post("/v1/screenshot/take", json={**params, "vision_response_schema": schema})


@pytest.mark.parametrize("index", range(4), ids=["ref", "id-relative", "dynamic-ref", "through-defs"])
@pytest.mark.parametrize("how", ["query", "body"])
def test_a_schema_never_makes_anything_fetch(isolated_http: httpx.Client, isolated_org: Org, site: Site,
                                             canary: Receiver, index: int, how: str) -> None:
    """References resolve inside the schema only: one naming a URL is refused when the request arrives, and
    nothing (API or worker) ever asks the URL."""
    response = _with_schema(isolated_http, isolated_org, site, _fetching_schemas(canary)[index], how)
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error_code"] == "request_not_valid"
    assert [d["field"] for d in body["error_details"]] == ["vision_response_schema"]
    assert "does not resolve inside the schema" in body["error_message"]
    assert canary.requests == []
    assert used(isolated_http, isolated_org) == 0


@pytest.mark.parametrize("name", list(BAD_SCHEMAS))
@pytest.mark.parametrize("how", ["query", "body"])
def test_a_schema_that_would_loop_or_backtrack_is_refused_naming_the_field(
        isolated_http: httpx.Client, isolated_org: Org, site: Site, name: str, how: str) -> None:
    response = _with_schema(isolated_http, isolated_org, site, BAD_SCHEMAS[name], how)
    assert response.status_code == 400, response.text
    assert response.json()["error_code"] == "request_not_valid"
    assert [d["field"] for d in response.json()["error_details"]] == ["vision_response_schema"]
    assert used(isolated_http, isolated_org) == 0


def test_a_catastrophic_pattern_is_checked_in_linear_time(isolated_http: httpx.Client, isolated_org: Org,
                                                          site: Site) -> None:
    """`^(a+)+$` against 40 a's and a "!" would take Python's re about 2^40 steps: RE2 answers at once, so the
    answer outside the schema is a clear error (not a worker stuck until the job's deadline)."""
    schema = {"type": "object", "additionalProperties": False, "required": ["prompt"],
              "properties": {"prompt": {"type": "string", "pattern": "^(a+)+$"}},
              "patternProperties": {"^(b+)+$": {"type": "string"}}}
    response = take(isolated_http, isolated_org, site, vision_provider_api_key="sk-test-good",
                    vision_prompt="a" * 40 + "!", vision_response_schema=json.dumps(schema), timeout="30")
    assert response.status_code == 500, response.text
    body = response.json()
    assert body["error_code"] == "vision_response_invalid" and "does not match" in body["error_message"], body
    assert used(isolated_http, isolated_org) == 0


def everything_in(connection: redis.Redis) -> bytes:
    """Every key and value of the database, RQ's zlib-compressed job payloads decompressed."""
    dump: list[bytes] = []
    for key in connection.scan_iter(count=1000):
        kind = connection.type(key).decode()
        values: list[bytes] = []
        if kind == "string":
            values = [connection.get(key) or b""]
        elif kind == "hash":
            values = [part for pair in connection.hgetall(key).items() for part in pair]
        elif kind == "list":
            values = connection.lrange(key, 0, -1)
        elif kind == "set":
            values = list(connection.smembers(key))
        elif kind == "zset":
            values = [member for member, _ in connection.zrange(key, 0, -1, withscores=True)]
        elif kind == "stream":
            values = [part for _, entry in connection.xrange(key) for pair in entry.items() for part in pair]
        for value in values:
            dump.append(value)
            try:
                dump.append(zlib.decompress(value))
            except zlib.error:
                pass
        dump.append(key)
    return b"\n".join(dump)


def test_the_key_is_never_stored_nor_logged(isolated: RunningService, isolated_http: httpx.Client,
                                            isolated_org: Org, site: Site, log_path: Path) -> None:
    secret_key = "sk-test-good"
    response = take(isolated_http, isolated_org, site, vision_provider_api_key=secret_key,
                    vision_prompt="prompt-marker-7f3a", response_type="json")
    assert response.status_code == 200, response.text
    # An async job too: its payload waits in Redis (the lane's stream entry, the record) until it has run.
    accepted = take(isolated_http, isolated_org, site, vision_provider_api_key=secret_key,
                    vision_prompt="prompt-marker-async", external_identifier="payload-marker-async",
                    delay="2", **{"async": "true"})
    assert accepted.status_code == 202, accepted.text
    waiting = everything_in(redis.Redis.from_url(isolated.redis_url))
    status_url = f"/v1/screenshot/jobs/{accepted.json()['reference']}"
    wait_for(lambda: isolated_http.get(status_url, params={"access_key": isolated_org.access_key}).json()["status"]
             == "done", 30, "the async vision job")
    stored = waiting + everything_in(redis.Redis.from_url(isolated.redis_url))
    # The scan sees the async job's payload (its options are there) but no key, revoked, good or otherwise,
    # nor the prompt: the vision request travels sealed with the job's other secrets.
    assert b"payload-marker-async" in waiting
    assert b"prompt-marker-async" not in stored
    assert response.headers["x-service-reference"].encode() in stored
    for key in VISION_KEYS:
        assert key.encode() not in stored, f"{key} found in Redis"
    log = log_path.read_bytes()
    assert response.headers["x-service-reference"].encode() in log  # the worker logged this job at DEBUG
    job_lines = [json.loads(line) for line in log.decode().splitlines()
                 if line.startswith("{") and response.headers["x-service-reference"] in line]
    assert job_lines and all(line["trace_id"] == response.headers["x-service-trace-id"] for line in job_lines)
    assert {"time", "level", "logger", "message"} <= set(job_lines[0])
    for key in VISION_KEYS:
        assert key.encode() not in log, f"{key} found in the service's log"
    stored_files = [p for p in isolated.data_dir.rglob("*") if p.is_file()]
    assert stored_files, "nothing stored: the json result should be"
    for path in stored_files:
        assert secret_key.encode() not in path.read_bytes(), path


def test_secrets_of_the_newer_surfaces_are_never_stored_nor_logged(isolated: RunningService,  # type: ignore[no-untyped-def]
                                                                   isolated_http: httpx.Client, make_org_in,
                                                                   site: Site, log_path: Path) -> None:
    """Compare sides, bulk entries, a monitor's request and an encrypted PDF carry the caller's credentials:
    none of them rests in Redis (any value, RQ's compressed payloads included) or shows in a log line, while
    each job waits or after it ran."""
    org = make_org_in(isolated.redis_url)
    page = {"url": site.url("/colours.html"), "viewport_width": 200, "viewport_height": 100}
    secrets = {"cookies": ["session=cmp-cookie-9d1e"], "authorization": "Bearer cmp-token-4b7c",
               "headers": ["X-Api-Token: cmp-header-2a8f"]}
    compared = isolated_http.post("/v1/screenshot/compare", json={
        "access_key": org.access_key, "before": {**page, **secrets}, "after": {**page, **secrets}}, timeout=120)
    assert compared.status_code == 200, compared.text
    merged = isolated_http.post("/v1/screenshot/bulk", json={
        "access_key": org.access_key, "execute": True, "merge_pdf": True,
        "options": {"format": "pdf", "headers": ["X-Api-Token: bulk-header-6c3d"]},
        "requests": [{"html": "<p>one</p>"}, {"url": page["url"], "cookies": ["s=bulk-cookie-1e5b"]}]}, timeout=120)
    assert merged.status_code == 200, merged.text
    monitor = isolated_http.post("/v1/monitors", json={
        "access_key": org.access_key, "request": {**page, "authorization": "Bearer mon-token-8f2a"},
        "schedule": {"interval": 3600}, "paused": True})
    assert monitor.status_code == 201, monitor.text
    waiting = isolated_http.get("/v1/screenshot/take", params={
        "access_key": org.access_key, "html": "<p>locked</p>", "format": "pdf", "pdf_user_password": "pdf-pass-3e9c",
        "pdf_owner_password": "pdf-owner-7a1d", "delay": "2", "async": "true"})
    assert waiting.status_code == 202, waiting.text
    stored = everything_in(redis.Redis.from_url(isolated.redis_url))
    status_url = f"/v1/screenshot/jobs/{waiting.json()['reference']}"
    wait_for(lambda: isolated_http.get(status_url, params={"access_key": org.access_key}).json()["status"]
             == "done", 30, "the async encrypted PDF")
    stored += everything_in(redis.Redis.from_url(isolated.redis_url))
    logged = log_path.read_bytes()
    for secret in (b"cmp-cookie-9d1e", b"cmp-token-4b7c", b"cmp-header-2a8f", b"bulk-header-6c3d",
                   b"bulk-cookie-1e5b", b"mon-token-8f2a", b"pdf-pass-3e9c", b"pdf-owner-7a1d"):
        assert secret not in stored, secret
        assert secret not in logged, secret
    assert b"mon-token-8f2a" not in monitor.content and b"cmp-token-4b7c" not in compared.content
