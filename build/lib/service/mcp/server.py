"""`screenshot-service mcp`: the service as a tool for AI agents, over the Model Context Protocol (the official `mcp`
SDK), on stdio or streamable HTTP.

It is a client of a running API, so every call meets the same keys, signatures, network policy, quota and
concurrency as any HTTP caller. Tools: `take` (an image, PDF, Markdown, HTML or ARIA snapshot of a page), `animate`
(a recording), `compare` (two shots of a page), `job_status`. Their parameters are the API's own schema (the
options model). Images come back as MCP image content, Markdown, HTML and YAML as text, and what is large or not
an image (PDF, video) as a link. The organisation's key: on stdio the server's (`--access-key`,
SCREENSHOT_ACCESS_KEY), over HTTP each client's own, as `Authorization: Bearer <key>` or `X-Access-Key` (the
server lends none: a client without a key is refused). Over HTTP only the allowed Host and Origin headers are
answered, whatever the address the server listens on (`--allowed-hosts`, `--allowed-origins`).
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import anyio
import httpx
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from render.settings import SERVICE_VERSION
from service.api_answers import refusal
from service.options_schema import options_schema

INLINE_IMAGE_BYTES = 5 * 1024 * 1024  # larger images come back as a link
INLINE_TEXT_CHARS = 200_000  # longer Markdown or HTML comes back as a link
TIMEOUT_SECONDS = 330  # beyond the longest capture (async timeout 300) and its queueing
# The options a tool call does not take: credentials (the session's key), and what belongs to HTTP callers.
NOT_TOOL_OPTIONS = frozenset({"access_key", "signature", "response_type", "async", "webhook_url", "webhook_sign",
                              "webhook_errors", "external_identifier", "attachment_name"})
TEXT_TYPES = ("text/", "application/yaml", "application/json")


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
            "The state of a capture job by its reference: queued, rendering, done (with its link) or failed."),
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


async def shown(client: ApiClient, answer: dict[str, Any], media_type: str) -> list[types.ContentBlock]:
    """A stored result as MCP content: an image or text inline when small enough, else its link; and the facts."""
    url = answer.get("screenshot_url")
    facts = {key: value for key, value in answer.items() if key not in ("is_successful",)}
    content: list[types.ContentBlock] = []
    size = int(answer.get("size_bytes") or 0)
    if url and media_type.startswith("image/") and size <= INLINE_IMAGE_BYTES:
        data = await client.fetch(url)
        content.append(types.ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=media_type))
    elif url and media_type.startswith(TEXT_TYPES) and size <= INLINE_TEXT_CHARS:
        content.append(types.TextContent(type="text", text=(await client.fetch(url)).decode(errors="replace")))
    content.append(types.TextContent(type="text", text=json.dumps(facts, indent=1)))
    return content


async def call(client: ApiClient, name: str, arguments: dict[str, Any]) -> list[types.ContentBlock]:
    if name in ("take", "animate"):
        unknown = sorted(set(arguments) & NOT_TOOL_OPTIONS)
        if unknown:
            raise ToolFailure(f"request_not_valid: {', '.join(unknown)} cannot be given to this tool.")
        response = await client.request("POST", f"/v1/screenshot/{name}", {**arguments, "response_type": "json"})
        answer = {**response.json(), "reference": response.headers.get("x-service-reference")}
        media_type = MEDIA_TYPES.get(str(answer.get("format") or arguments.get("format") or "png"), "")
        return await shown(client, answer, media_type)
    if name == "compare":
        answer = (await client.request("POST", "/v1/screenshot/compare", arguments)).json()
        diff = await client.fetch(answer["diff"]["url"])
        return [types.ImageContent(type="image", data=base64.b64encode(diff).decode(), mime_type="image/png"),
                types.TextContent(type="text", text=json.dumps(answer, indent=1))]
    if name == "job_status":
        reference = str(arguments.get("reference", ""))
        if not reference.isalnum():
            raise ToolFailure("request_not_valid: reference must be a job reference (letters and digits).")
        answer = (await client.request("GET", f"/v1/screenshot/jobs/{reference}")).json()
        return [types.TextContent(type="text", text=json.dumps(answer, indent=1))]
    raise ToolFailure(f"request_not_valid: no tool {name!r}; the tools are take, animate, compare, job_status.")


def media_types() -> dict[str, str]:
    from render.contract.formats import FORMATS

    return {name: fmt.bare_media_type for name, fmt in FORMATS.items()}


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
        try:
            content = await call(ApiClient(api, key), params.name, dict(params.arguments or {}))
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
