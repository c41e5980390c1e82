"""`screenshot-service mcp` driven by the official MCP SDK's own client, over stdio and over streamable HTTP:
the tools and their schemas, an image returned as MCP image content, Markdown as text, a PDF as a link, a compare,
a job's status, refusals named as the API names them, and the organisation's key and quota as for any caller."""

from __future__ import annotations

import base64
import json
import random
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import Org
from tests.integration.conftest import TypeScriptRun
from tests.support.archive_tools import archive_problems
from tests.support.background import LATE_SECONDS, SMALL, environment
from tests.support.images import decode, near, rgb_at
from tests.support.servers import ROOT, RunningService, free_port, wait_for
from tests.support.site import Site

pytestmark = pytest.mark.browser
PRICES = {"viewport_width": 640, "viewport_height": 300}  # the price list's price is in view


@pytest.fixture(scope="module")
def mcp_http(service: RunningService) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "service.cli", "mcp", "--transport", "http", "--api",
                                service.url, "--port", str(port)], cwd=ROOT, env=environment())
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_for(lambda: httpx.get(url.removesuffix("/mcp") + "/", timeout=2) is not None, 30, "the MCP server")
        yield url
    finally:
        process.terminate()
        process.wait(10)


def over_stdio(service: RunningService, key: str) -> Client:
    return Client(StdioServerParameters(command=sys.executable, args=[
        "-m", "service.cli", "mcp", "--api", service.url, "--access-key", key], env=environment(), cwd=str(ROOT)))


def http_client(key: str | None) -> httpx2.AsyncClient:
    """What an MCP client over HTTP sends: its organisation's key as a bearer token."""
    return httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"} if key else {}, timeout=120)


def run(work: Any) -> Any:
    return anyio.run(work)


def used(client: httpx.Client, org: Org) -> int:
    return int(client.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"])


def facts(result: Any) -> dict[str, Any]:
    return dict(json.loads(next(part.text for part in reversed(result.content) if part.type == "text")))


def test_the_tools_over_stdio(service: RunningService, client: httpx.Client, make_org, site: Site) -> None:  # type: ignore[no-untyped-def]
    org = make_org()

    async def session() -> dict[str, Any]:
        async with over_stdio(service, org.access_key) as mcp:
            listed = await mcp.list_tools()
            image = await mcp.call_tool("take", {"url": site.url("/colours.html"), **SMALL})
            markdown = await mcp.call_tool("take", {"url": site.url("/article.html"), "format": "markdown"})
            document = await mcp.call_tool("take", {"url": site.url("/article.html"), "format": "pdf"})
            refused = await mcp.call_tool("take", {"url": site.url("/colours.html"), "viewport_width": 0})
            async_refused = await mcp.call_tool("take", {"url": site.url("/colours.html"), "webhook_url": "x"})
            compared = await mcp.call_tool("compare", {
                "before": {"url": site.url("/watch/page.html?v=base"), **PRICES},
                "after": {"url": site.url("/watch/page.html?v=text"), **PRICES}})
            status = await mcp.call_tool("job_status", {"reference": facts(image)["reference"]})
            video = await mcp.call_tool("animate", {"url": site.url("/colours.html"), "format": "mp4", "duration": 1,
                                                    "viewport_width": 160, "viewport_height": 120})
            archived = await mcp.call_tool("take", {"url": site.url("/colours.html"), **SMALL, "archive": True})
            wacz = await mcp.call_tool("take", {"url": site.url("/colours.html"), **SMALL, "format": "wacz"})
            return {"video": video, "tools": listed.tools, "image": image, "markdown": markdown, "pdf": document,
                    "refused": refused, "async_refused": async_refused, "compared": compared, "status": status,
                    "archived": archived, "wacz": wacz}

    got = run(session)
    tools = {tool.name: tool for tool in got["tools"]}
    assert sorted(tools) == ["animate", "compare", "job_status", "take"]
    take_schema = tools["take"].input_schema["properties"]
    assert {"url", "html", "markdown", "format", "full_page", "markdown_content"} <= set(take_schema)
    assert not {"access_key", "signature", "webhook_url", "async", "response_type"} & set(take_schema)
    assert "mp4" in json.dumps(tools["animate"].input_schema["properties"]["format"])
    image = got["image"]
    assert not image.is_error and image.content[0].type == "image" and image.content[0].mime_type == "image/png"
    picture = decode(base64.b64decode(image.content[0].data))
    assert (picture.width, picture.height) == (200, 100) and near(rgb_at(picture, 100, 20), (255, 0, 0))
    assert got["markdown"].content[0].type == "text" and "Quarterly report" in got["markdown"].content[0].text
    link = facts(got["pdf"])["screenshot_url"]
    assert httpx.get(link, timeout=30).content.startswith(b"%PDF")
    assert got["refused"].is_error and "request_not_valid" in got["refused"].content[0].text
    assert "viewport_width" in got["refused"].content[0].text
    assert got["async_refused"].is_error and "webhook_url" in got["async_refused"].content[0].text
    compared = got["compared"]
    assert compared.content[0].type == "image" and facts(compared)["changed"] is True
    assert facts(got["status"])["status"] == "done"
    video = got["video"]  # a video comes back as its link: resource_link content, and in the facts
    assert not video.is_error and [part.type for part in video.content] == ["resource_link", "text"]
    assert video.content[0].uri == facts(video)["screenshot_url"] and video.content[0].mime_type == "video/mp4"
    assert httpx.get(video.content[0].uri, timeout=30).content[4:8] == b"ftyp"  # an MP4
    assert [part.type for part in image.content] == ["image", "resource_link", "text"]  # inline, and its link
    assert image.content[1].size == facts(image)["size_bytes"] == len(base64.b64decode(image.content[0].data))
    assert [part.type for part in compared.content] == ["image", "resource_link", "resource_link", "resource_link",
                                                        "text"]  # the diff inline; before, after and diff linked
    # The web archive comes as a link: beside the image with archive=true, as the answer with format=wacz.
    archived, wacz = got["archived"], got["wacz"]
    assert [part.type for part in archived.content] == ["image", "resource_link", "resource_link", "text"]
    assert archived.content[2].mime_type == "application/wacz" and archived.content[2].name.endswith(".wacz")
    assert archive_problems(httpx.get(archived.content[2].uri, timeout=30).content) == []
    assert [part.type for part in wacz.content] == ["resource_link", "text"]
    assert wacz.content[0].mime_type == "application/wacz" and wacz.content[0].name.endswith(".wacz")
    assert archive_problems(httpx.get(wacz.content[0].uri, timeout=30).content) == []
    assert used(client, org) == 8  # five takes, the compare's two shots and the recording


def test_the_tools_over_streamable_http_with_each_client_s_key(mcp_http: str, client: httpx.Client, make_org,  # type: ignore[no-untyped-def]
                                                               site: Site) -> None:
    org, other = make_org(), make_org(quota=0)

    async def session(key: str | None) -> Any:
        async with http_client(key) as http, Client(streamable_http_client(mcp_http, http_client=http)) as mcp:
            return await mcp.call_tool("take", {"url": site.url("/colours.html"), **SMALL, "format": "webp"})

    done = run(lambda: session(org.access_key))
    assert not done.is_error and done.content[0].mime_type == "image/webp"
    assert used(client, org) == 1
    nobody = run(lambda: session(None))
    assert nobody.is_error and "access_key_required" in nobody.content[0].text
    wrong = run(lambda: session("not-a-key"))
    assert wrong.is_error and "access_key_invalid" in wrong.content[0].text
    spent = run(lambda: session(other.access_key))  # the organisation's own quota applies
    assert spent.is_error and "screenshots_limit_reached" in spent.content[0].text


# --- a standard client that nobody here wrote: the official TypeScript SDK -------------------------


def test_a_standard_typescript_client_completes_a_65_s_capture_and_cancels_a_queued_one(
        typescript_mcp_run: TypeScriptRun) -> None:
    """The official TypeScript SDK's client with its defaults (a 60 s request timeout, extended on progress as a
    client that shows progress asks), over stdio and streamable HTTP at once: a capture that waits 65 s for its
    selector completes, kept alive by progress notifications that say the job's state; a call cancelled while its
    job waits in the queue (every worker busy with a long capture) cancels the job: never rendered, not charged.
    Started with the run on a service of its own (tests/support/background.py): its 65 s overlap the other
    tests."""
    status, got, errors = typescript_mcp_run.result()
    assert status == 0 and got is not None, errors
    for long in got["long"]:  # type: ignore[attr-defined]
        assert "error" not in long and not long["isError"], {k: v for k, v in long.items() if k != "progress"}
        assert long["seconds"] > 60  # past the SDK's default timeout: only progress kept the call alive
        assert [part["type"] for part in long["content"]] == ["image", "resource_link", "text"]
        picture = decode(base64.b64decode(long["content"][0]["data"]))
        assert near(rgb_at(picture, 100, 50), (0, 255, 0))  # captured once #ready was there
        link = long["content"][1]
        assert link["mimeType"] == "image/png" and httpx.get(link["uri"], timeout=30).content.startswith(b"\x89PNG")
        notes = long["progress"]
        assert [note["progress"] for note in notes] == sorted({note["progress"] for note in notes})  # increasing
        assert any(": rendering, waiting for the page" in note["message"] for note in notes)  # its stage, told
        gaps = [later["at"] - earlier["at"] for earlier, later in zip(notes, notes[1:], strict=False)]
        assert len(notes) >= LATE_SECONDS / 4 and max(gaps) < 10, gaps  # every few seconds
    for call in got["cancelled"]:  # type: ignore[attr-defined]
        assert call["reference"] and call["error"], call  # the client's call ended as cancelled
        assert call["status"]["status"] == "cancelled", call  # the job too: it had not started
    assert typescript_mcp_run.used() == typescript_mcp_run.sides  # the long captures, not the cancelled ones


# --- the HTTP server as closed as the API --------------------------------------------------------


def _start_http(service: RunningService, host: str, *extra: str, env: dict[str, str] | None = None
                ) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "service.cli", "mcp", "--transport", "http", "--api",
                                service.url, "--host", host, "--port", str(port), *extra], cwd=ROOT,
                               env={**environment(), **(env or {})})
    base = f"http://{host}:{port}"
    wait_for(lambda: httpx.get(base + "/", timeout=2) is not None, 30, "the MCP server")
    return process, base


def _initialize(base: str, **headers: str) -> httpx.Response:
    return httpx.post(base + "/mcp", headers={"accept": "application/json, text/event-stream", **headers}, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})


def test_the_http_server_lends_no_key(service: RunningService, client: httpx.Client, make_org,  # type: ignore[no-untyped-def]
                                      site: Site) -> None:
    """SCREENSHOT_ACCESS_KEY is the stdio server's key: over HTTP a client that sends none is refused and nothing
    is charged to the key's organisation; --access-key with --transport http is refused at start."""
    org = make_org()
    process, base = _start_http(service, "127.0.0.1", env={"SCREENSHOT_ACCESS_KEY": org.access_key})
    try:
        async def keyless() -> Any:
            async with http_client(None) as http, Client(
                    streamable_http_client(base + "/mcp", http_client=http)) as mcp:
                return await mcp.call_tool("take", {"url": site.url("/colours.html"), **SMALL})

        refused = run(keyless)
        assert refused.is_error and "access_key_required" in refused.content[0].text
        assert used(client, org) == 0
    finally:
        process.terminate()
        process.wait(10)
    start = subprocess.run([sys.executable, "-m", "service.cli", "mcp", "--transport", "http", "--api", service.url,
                            "--access-key", org.access_key], cwd=ROOT, env=environment(), capture_output=True,
                           timeout=30)
    assert start.returncode == 2 and b"--access-key is for stdio" in start.stderr


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2"], ids=["loopback", "another-address"])
def test_foreign_hosts_and_origins_are_refused_whatever_the_bind_address(service: RunningService,
                                                                         host: str) -> None:
    """DNS rebinding: a page of another site reaching the server by a name that resolves to it. Bound to any
    address, another Host gets 421 and another Origin 403; the bind address, loopback names and the allowed
    ones are answered."""
    process, base = _start_http(service, host)
    try:
        port = base.rsplit(":", 1)[1]
        assert _initialize(base).status_code == 200
        assert _initialize(base, host=f"evil.example:{port}").status_code == 421
        assert _initialize(base, origin="http://evil.example").status_code == 403
        assert _initialize(base, origin=f"http://{host}:{port}").status_code == 200
        assert _initialize(base, host=f"localhost:{port}").status_code == 200
    finally:
        process.terminate()
        process.wait(10)
    process, base = _start_http(service, host, "--allowed-hosts", "agents.internal:*",
                                "--allowed-origins", "https://agents.internal")
    try:
        port = base.rsplit(":", 1)[1]
        assert _initialize(base, host=f"agents.internal:{port}").status_code == 200
        assert _initialize(base, host=f"agents.internal:{port}", origin="https://agents.internal").status_code == 200
        assert _initialize(base).status_code == 421  # only what was given
    finally:
        process.terminate()
        process.wait(10)


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"v": value}
    return value


BAD_ARGUMENTS = [
    ("take", {}),
    ("take", {"url": 42}),
    ("take", {"url": "http://a.test/", "viewport_width": "wide"}),
    ("take", {"url": "http://a.test/", "full_page": {"v": 1}}),
    ("take", {"url": "http://a.test/", "unknown_parameter": True}),
    ("take", {"url": "http://a.test/" + "a" * 100_000}),
    ("take", {"url": "http://a.test/", "vision_provider_api_key": "k", "vision_response_schema": _deep(150)}),
    ("take", {"url": "http://a.test/", "vision_provider_api_key": "k", "vision_response_schema": {"$ref": "#"}}),
    ("take", {"html": "<p>x</p>", "format": "pdf", "pdf_header_template": "<link rel=stylesheet href=/x.css>"}),
    ("animate", {"url": "http://a.test/", "duration": -1}),
    ("compare", {"before": "not an object", "after": {}}),
    ("compare", {"before": {"reference": "nothing-of-ours"}, "after": {"reference": ["x"]}}),
    ("job_status", {"reference": _deep(50)}),
    ("job_status", {}),
    ("no_such_tool", {"url": "http://a.test/"}),
]


def test_bad_tool_arguments_are_tool_errors_never_a_broken_session(service: RunningService, client: httpx.Client,  # type: ignore[no-untyped-def]
                                                                  make_org, site: Site) -> None:
    """Wrong types, unknown fields, huge, deep and self-referencing arguments: each a tool error with the API's
    code, nothing charged, and the session still answers a good call afterwards."""
    org = make_org()

    async def session() -> tuple[list[Any], Any]:
        async with over_stdio(service, org.access_key) as mcp:
            answers = [await mcp.call_tool(name, arguments) for name, arguments in BAD_ARGUMENTS]
            good = await mcp.call_tool("take", {"url": site.url("/colours.html"), **SMALL})
            return answers, good

    answers, good = run(session)
    for (name, arguments), answer in zip(BAD_ARGUMENTS, answers, strict=True):
        text = " ".join(part.text for part in answer.content if part.type == "text")
        assert answer.is_error, (name, str(arguments)[:200], text[:300])
        assert "internal_application_error" not in text, (name, text[:300])
    assert not good.is_error and good.content[0].type == "image"
    assert used(client, org) == 1


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.choice(["null", "bool", "int", "float", "text", "long", "list", "object"] if depth < 4
                      else ["null", "bool", "int", "text"])
    if kind == "list":
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind == "object":
        return {rng.choice(["v", "$ref", "url", "x"]): _random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    return {"null": None, "bool": rng.random() < 0.5, "int": rng.choice([-1, 0, 1, 2**31, 10**20]),
            "float": rng.choice([0.5, -0.0, 1e308]), "text": rng.choice(["", "x", "#", "http://a.test/", "ü\u0000"]),
            "long": "y" * rng.choice([1000, 70_000])}[kind]


def test_the_tools_fuzzed_with_random_arguments(service: RunningService, client: httpx.Client, make_org,  # type: ignore[no-untyped-def]
                                                site: Site) -> None:
    """Each tool called with arguments drawn from its own input schema's names (and some unknown), of random types,
    sizes and depths (seeded, so a failure repeats): every answer is a result or a tool error, never an internal
    error or a dropped session."""
    org = make_org(quota=10_000, concurrency=4)
    rng = random.Random(46)

    async def session() -> list[tuple[str, dict[str, Any], Any]]:
        async with over_stdio(service, org.access_key) as mcp:
            listed = (await mcp.list_tools()).tools
            tools = {tool.name: sorted(tool.input_schema.get("properties", {})) for tool in listed}
            answers = []
            for name, properties in sorted(tools.items()):
                for _ in range(12):
                    names = rng.sample(properties, min(len(properties), rng.randint(0, 4)))
                    if rng.random() < 0.2:
                        names.append("unknown")
                    arguments = {field: _random_value(rng) for field in names}
                    if name in ("take", "animate") and rng.random() < 0.5:
                        arguments["url"] = site.url("/colours.html")
                        arguments["timeout"] = 10
                    answers.append((name, arguments, await mcp.call_tool(name, arguments)))
            return answers

    for name, arguments, answer in run(session):
        text = " ".join(part.text for part in answer.content if part.type == "text")
        assert "internal_application_error" not in text, (name, str(arguments)[:300], text[:300])
        assert answer.is_error or answer.content, (name, str(arguments)[:300])
