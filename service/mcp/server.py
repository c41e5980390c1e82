"""`screenshot-service mcp`: the service as a tool for AI agents, over the Model Context Protocol (the official `mcp`
SDK), on stdio or streamable HTTP.

It is a client of a running API, so every call meets the same keys, signatures, network policy, quota and
concurrency as any HTTP caller. Tools: `take` (an image, PDF, Markdown, HTML or ARIA snapshot of a page), `animate`
(a recording), `compare` (two shots of a page), `job_status`. Their parameters are the API's own schema (the
options model). Images come back as MCP image content, Markdown, HTML and YAML as text, and every stored result
as a `resource_link` too (what is large or not an image, a PDF or a video, only so).

A capture runs as an async job of the API that the tool call watches: while it runs, a client that sent a
progress token gets `notifications/progress` on every change of state and every PROGRESS_SECONDS (the job's
reference and what it is doing: queued, then rendering: loading the page, waiting for it, capturing, storing...),
so a long capture keeps a standard client waiting; a call the client cancels cancels the job if no worker has
started it (never rendered, nothing charged), and is logged with what was charged.

The organisation's key: on stdio the server's (`--access-key`, SCREENSHOT_ACCESS_KEY), over HTTP each client's
own, as `Authorization: Bearer <key>` or `X-Access-Key` (the server lends none: a client without a key is
refused). Over HTTP only the allowed Host and Origin headers are answered, whatever the address the server listens
on (`--allowed-hosts`, `--allowed-origins`).
"""

from __future__ import annotations

import base64
import copy
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from render.contract.formats import FORMATS
from render.settings import SERVICE_VERSION
from service.api_answers import refusal
from service.options_schema import options_schema

INLINE_IMAGE_BYTES = 5 * 1024 * 1024  # larger images come back as a link
INLINE_TEXT_CHARS = 200_000  # longer Markdown or HTML comes back as a link
TIMEOUT_SECONDS = 330  # beyond the longest capture (async timeout 300) and its queueing
# How a progress message names the stage a rendering job is in (render.contract.timings.STAGES).
STAGE_WORDS = {"context": "opening a page", "navigation": "loading the page", "waits": "waiting for the page",
               "preparation": "preparing the page", "capture": "capturing", "encode": "encoding",
               "metadata": "reading metadata", "store": "storing"}
PROGRESS_SECONDS = 2.0  # a running job's progress is told at least this often
POLL_SECONDS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.0)  # how soon a job's state is read again, growing to the last
log = logging.getLogger(__name__)
# The options a tool call does not take: credentials (the session's key), and what belongs to HTTP callers.
NOT_TOOL_OPTIONS = frozenset({"access_key", "signature", "response_type", "async", "webhook_url", "webhook_sign",
                              "webhook_errors", "external_identifier", "attachment_name"})
TEXT_TYPES = ("text/", FORMATS["aria"].bare_media_type, "application/json")  # answers given as text


class ToolFailure(Exception):
    """What the API refused, as the agent should read it."""


def tool_schema(kind: str) -> dict[str, Any]:
    """The JSON schema of the `take` or `animate` tool's arguments: the route's, without NOT_TOOL_OPTIONS."""
    schema = copy.deepcopy(options_schema(kind))
    schema["properties"] = {name: value for name, value in schema["properties"].items()
                            if name not in NOT_TOOL_OPTIONS}
    return schema


def tools() -> list[types.Tool]:
    source = {"type": "object", "additionalProperties": False, "description": "/take parameters of a shot, or "
              "{\"reference\": ...} of an earlier image result", "properties": {"reference": {"type": "string"}}}
    return [
        types.Tool(name="take", title="Capture a web page", input_schema=tool_schema("take"), description=(
            "Capture a web page (url), raw html or markdown: a screenshot (format png, jpeg, webp...), a PDF, the "
            "page as Markdown (markdown_content=main for the article alone) or HTML, or its accessibility tree "
            "(format=aria). Images come back inline, documents as text, PDFs as a link.")),
        types.Tool(name="animate", title="Record a web page", input_schema=tool_schema("animate"), description=(
            "Record a page as a video (mp4, webm, gif, mov): a scroll through it, or its motion. Answers a link.")),
        types.Tool(name="compare", title="Compare two shots of a page", description=(
            "Compare two shots of a page (each /take parameters, or the reference of an earlier image result): "
            "the share of pixels changed, SSIM, the changed regions, and the newer shot with its changes tinted."),
            input_schema={"type": "object", "required": ["before", "after"], "properties": {
                "before": {**source, "additionalProperties": True},
                "after": {**source, "additionalProperties": True},
                "threshold": {"type": "integer", "minimum": 0, "maximum": 255},
                "change_threshold": {"type": "number", "minimum": 0, "maximum": 1}}}),
        types.Tool(name="job_status", title="State of a job", description=(
            "The state of a capture job by its reference: queued, rendering (and its stage), done (with its link and "
            "facts), failed or cancelled."),
            input_schema={"type": "object", "required": ["reference"],
                         "properties": {"reference": {"type": "string"}}}),
    ]


class ApiClient:
    """Calls to the API with one organisation's key."""

    def __init__(self, api: str, key: str) -> None:
        self.api = api.rstrip("/")
        self.key = key

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.api, timeout=TIMEOUT_SECONDS, trust_env=False) as http:
            response = await http.request(method, path, json=body, headers={"x-access-key": self.key})
        if response.status_code >= 400:
            raise ToolFailure(refusal(response))
        return response

    async def fetch(self, url: str) -> bytes:
        """A result's bytes through its signed link (a link of this API's storage, or a CDN's)."""
        async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS, trust_env=False) as http:
            response = await http.get(url)
        response.raise_for_status()
        return response.content


def link(url: str, name: str, media_type: str | None = None, size: int | None = None) -> types.ResourceLink:
    """A stored result as MCP `resource_link` content (a signed link: it expires, as the API's links do)."""
    return types.ResourceLink(type="resource_link", uri=url, name=name, mime_type=media_type or None, size=size)


async def shown(client: ApiClient, answer: dict[str, Any], media_type: str) -> list[types.ContentBlock]:
    """A stored result as MCP content: an image or text inline when small enough, its link, and the facts."""
    url = answer.get("screenshot_url")
    facts = {key: value for key, value in answer.items() if key not in ("is_successful",)}
    content: list[types.ContentBlock] = []
    size = int(answer.get("size_bytes") or 0)
    if url and media_type.startswith("image/") and size <= INLINE_IMAGE_BYTES:
        data = await client.fetch(url)
        content.append(types.ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=media_type))
    elif url and media_type.startswith(TEXT_TYPES) and size <= INLINE_TEXT_CHARS:
        content.append(types.TextContent(type="text", text=(await client.fetch(url)).decode(errors="replace")))
    if url:
        content.append(link(url, f"{answer.get('reference') or 'result'}.{answer.get('format') or 'out'}",
                            media_type, size or None))
    archived = answer.get("archive")
    if isinstance(archived, dict) and archived.get("url"):  # archive=true: the page as a web archive
        content.append(link(archived["url"], f"{answer.get('reference') or 'result'}.wacz",
                            FORMATS["wacz"].media_type))
    content.append(types.TextContent(type="text", text=json.dumps(facts, indent=1)))
    return content


Progress = Callable[[float, str], Awaitable[None]]


async def watched(client: ApiClient, reference: str, progress: Progress) -> dict[str, Any]:
    """The async job's answer once it is done (ToolFailure when it failed or was cancelled), telling `progress`
    of every change of state and at least every PROGRESS_SECONDS. When the tool call is cancelled meanwhile,
    the job is cancelled too if no worker has started it, and the outcome is logged."""
    started = time.monotonic()
    told_state, told_at, polls = "", 0.0, 0
    try:
        while True:
            answer = (await client.request("GET", f"/v1/screenshot/jobs/{reference}")).json()
            state = str(answer.get("status"))
            if answer.get("stage"):  # what a rendering job is doing: loading the page, capturing, storing...
                state = f"{state}, {STAGE_WORDS.get(str(answer['stage']), answer['stage'])}"
            if state == "done":
                return dict(answer)
            if state in ("failed", "cancelled"):
                raise ToolFailure(f"{answer.get('error_code') or 'cancelled'}: "
                                  f"{answer.get('error_message') or 'the job was cancelled before it started.'}")
            elapsed = time.monotonic() - started
            if state != told_state or elapsed - told_at >= PROGRESS_SECONDS:
                await progress(elapsed, f"job {reference}: {state} ({elapsed:.0f} s)")
                told_state, told_at = state, elapsed
            await anyio.sleep(POLL_SECONDS[min(polls, len(POLL_SECONDS) - 1)])
            polls += 1
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True), anyio.move_on_after(10):
            await cancelled(client, reference)
        raise


async def cancelled(client: ApiClient, reference: str) -> dict[str, Any] | None:
    """Cancel the job of a cancelled tool call (DELETE /jobs/{reference}), and log what it cost."""
    try:
        answer: dict[str, Any] = (await client.request("DELETE", f"/v1/screenshot/jobs/{reference}")).json()
    except (ToolFailure, httpx.HTTPError) as error:
        log.warning("the tool call of job %s was cancelled; the job could not be: %s", reference, error)
        return None
    log.info("the tool call of job %s was cancelled: %s", reference, answer.get("message"))
    return answer


async def capture(client: ApiClient, name: str, arguments: dict[str, Any], progress: Progress
                  ) -> list[types.ContentBlock]:
    """`take` or `animate`: an async job of the API, watched to its end (a cached answer comes at once)."""
    response = await client.request("POST", f"/v1/screenshot/{name}",
                                    {**arguments, "response_type": "json", "async": True})
    if response.status_code == 202:
        answer = await watched(client, str(response.json()["reference"]), progress)
    else:  # cache=true and a live entry: answered now
        answer = {**response.json(), "reference": response.headers.get("x-service-reference")}
    default = "png" if name == "take" else "mp4"
    media_type = MEDIA_TYPES[name].get(str(answer.get("format") or arguments.get("format") or default), "")
    return await shown(client, answer, media_type)


async def no_progress(_progress: float, _message: str) -> None:
    """For a caller that sent no progress token."""


async def call(client: ApiClient, name: str, arguments: dict[str, Any], progress: Progress = no_progress
               ) -> list[types.ContentBlock]:
    if name in ("take", "animate"):
        unknown = sorted(set(arguments) & NOT_TOOL_OPTIONS)
        if unknown:
            raise ToolFailure(f"request_not_valid: {', '.join(unknown)} cannot be given to this tool.")
        return await capture(client, name, arguments, progress)
    if name == "compare":
        answer = (await client.request("POST", "/v1/screenshot/compare", arguments)).json()
        diff = await client.fetch(answer["diff"]["url"])
        png = FORMATS["png"].media_type
        links = [link(answer[side]["url"], f"{side}.png", png) for side in ("before", "after", "diff")
                 if isinstance(answer.get(side), dict) and answer[side].get("url")]
        return [types.ImageContent(type="image", data=base64.b64encode(diff).decode(), mime_type=png),
                *links, types.TextContent(type="text", text=json.dumps(answer, indent=1))]
    if name == "job_status":
        reference = str(arguments.get("reference", ""))
        if not reference.isalnum():
            raise ToolFailure("request_not_valid: reference must be a job reference (letters and digits).")
        answer = (await client.request("GET", f"/v1/screenshot/jobs/{reference}")).json()
        return [types.TextContent(type="text", text=json.dumps(answer, indent=1))]
    raise ToolFailure(f"request_not_valid: no tool {name!r}; the tools are take, animate, compare, job_status.")


def media_types() -> dict[str, dict[str, str]]:
    """Each capture tool's formats' media types."""
    from render.contract.formats import FORMATS, VIDEO_FORMATS

    return {tool: {name: fmt.bare_media_type for name, fmt in formats.items()}
            for tool, formats in (("take", FORMATS), ("animate", VIDEO_FORMATS))}


MEDIA_TYPES = media_types()


def key_of(context: Any, default: str | None) -> str | None:
    """The session's key: the HTTP request's (Authorization: Bearer, X-Access-Key), else the server's."""
    request = getattr(context, "request", None)
    headers = getattr(request, "headers", None)
    if headers is not None:
        bearer = headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            return str(bearer[7:].strip())
        if headers.get("x-access-key"):
            return str(headers["x-access-key"])
    return default


def build_server(api: str, default_key: str | None) -> Server[Any]:
    async def list_tools(context: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools())

    async def call_tool(context: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        key = key_of(context, default_key)
        if not key:
            return types.CallToolResult(is_error=True, content=[types.TextContent(type="text", text=(
                "access_key_required: send the organisation's access key as Authorization: Bearer <key> (or "
                "X-Access-Key), or start `screenshot-service mcp` with --access-key."))])
        token = (getattr(context, "meta", None) or {}).get("progress_token")
        told = [0.0]

        async def progress(elapsed: float, message: str) -> None:
            if token is not None:  # on the call's own stream (streamable HTTP: its SSE stream)
                told[0] = max(round(elapsed, 3), told[0] + 0.001)  # MCP: it increases with every notification
                await context.session.send_progress_notification(token, told[0], None, message,
                                                                 related_request_id=context.request_id)

        try:
            content = await call(ApiClient(api, key), params.name, dict(params.arguments or {}), progress)
        except ToolFailure as failure:
            return types.CallToolResult(is_error=True, content=[types.TextContent(type="text", text=str(failure))])
        except httpx.HTTPError as error:
            return types.CallToolResult(is_error=True, content=[types.TextContent(type="text", text=(
                f"temporary_unavailable: the screenshot API at {api} could not be reached ({type(error).__name__})"
                "; retry."))])
        return types.CallToolResult(content=content)

    return Server("screenshot-service", version=SERVICE_VERSION, title="screenshot-service",
                  instructions="Capture web pages as images, PDFs, Markdown or videos, and compare them.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(api: str, key: str | None) -> None:
    server = build_server(api, key)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


LOCAL_NAMES = ("127.0.0.1", "localhost", "[::1]")


def allowed_hosts(host: str, given: list[str]) -> list[str]:
    """The Host headers the HTTP server answers: `given` (name:port, port `*` for any), else the bind address and
    the loopback names (a server bound to every interface, 0.0.0.0 or ::, is reached by its operator's names,
    which must then be given)."""
    if given:
        return given
    bound = [] if host in ("0.0.0.0", "::", "") else [f"[{host}]" if ":" in host else host]
    return [f"{name}:*" for name in dict.fromkeys([*bound, *LOCAL_NAMES])]


def allowed_origins(hosts: list[str], given: list[str]) -> list[str]:
    """The Origin headers a browser's request may carry: `given`, else http and https of every allowed host."""
    return given or [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]


def serve(api: str, key: str | None, transport: str, host: str, port: int, hosts: list[str] | None = None,
          origins: list[str] | None = None) -> None:
    """Run until stopped: on stdio with the server's key, or streamable HTTP at http://HOST:PORT/mcp where every
    client brings its own key and only the allowed Host and Origin headers are answered (DNS rebinding: 421 for
    another Host, 403 for another Origin), whatever the address it listens on."""
    if transport == "stdio":
        anyio.run(serve_stdio, api, key)
        return
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    names = allowed_hosts(host, hosts or [])
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=names,
                                         allowed_origins=allowed_origins(names, origins or []))
    app = build_server(api, None).streamable_http_app(host=host, transport_security=security)
    uvicorn.run(app, host=host, port=port, log_level="warning")
