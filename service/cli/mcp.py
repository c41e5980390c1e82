"""`screenshot-service mcp`: its arguments and how it starts the MCP server (service.mcp.server)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any


def add_mcp_command(commands: Any, command: Callable[..., argparse.ArgumentParser],
                    port_number: Callable[[str], int]) -> None:
    """The `mcp` command's parser, among `commands` (made by the CLI's `command` helper)."""
    mcp = command(commands, "mcp", "the service as MCP tools for AI agents (take, animate, compare, job_status), on "
                  "stdio or streamable HTTP, through a running API",
                  description="Serve the Model Context Protocol: tools take, animate, compare and job_status, "
                  "answered by a running API (same keys, policy, quota and concurrency). On stdio (an agent "
                  "starts it) the organisation's key is --access-key or SCREENSHOT_ACCESS_KEY; over HTTP "
                  "(http://HOST:PORT/mcp) each client sends its own as Authorization: Bearer <key>.")
    mcp.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default: stdio")
    mcp.add_argument("--api", help="the API's base URL (default: SCREENSHOT_PUBLIC_BASE_URL, else "
                     "http://SCREENSHOT_HOST:SCREENSHOT_PORT)")
    mcp.add_argument("--access-key", help="stdio only: the organisation's key (default: SCREENSHOT_ACCESS_KEY); "
                     "over HTTP the server lends no key")
    mcp.add_argument("--host", default="127.0.0.1", help="http: the address to listen on (default 127.0.0.1)")
    mcp.add_argument("--port", type=port_number, default=8765, help="http: the port (default 8765)")
    mcp.add_argument("--allowed-hosts", default=os.environ.get("SCREENSHOT_MCP_ALLOWED_HOSTS", ""),
                     help="http: comma-separated Host headers answered, name:port or name:* (default: "
                     "SCREENSHOT_MCP_ALLOWED_HOSTS, else the --host address and 127.0.0.1, localhost, [::1], any "
                     "port); others get 421 (DNS rebinding)")
    mcp.add_argument("--allowed-origins", default=os.environ.get("SCREENSHOT_MCP_ALLOWED_ORIGINS", ""),
                     help="http: comma-separated Origin headers answered (default: SCREENSHOT_MCP_ALLOWED_ORIGINS, "
                     "else http:// and https:// of every allowed host); others get 403")


def cmd_mcp(args: argparse.Namespace, default_api: Callable[[], str]) -> int:
    from service.mcp.server import serve

    api = args.api or default_api()
    if args.transport == "http" and args.access_key:
        print("screenshot-service mcp: --access-key is for stdio; over HTTP every client sends its own key "
              "(Authorization: Bearer <key>).", file=sys.stderr)
        return 2
    key = (args.access_key or os.environ.get("SCREENSHOT_ACCESS_KEY")) if args.transport == "stdio" else None
    hosts, origins = _listed(args.allowed_hosts), _listed(args.allowed_origins)
    if args.transport == "http" and (problem := unusable(hosts, origins, args.port)):
        print(f"screenshot-service mcp: {problem}", file=sys.stderr)
        return 2
    serve(api, key, args.transport, args.host, args.port, hosts, origins)
    return 0


def unusable(hosts: list[str], origins: list[str], port: int) -> str | None:
    """Why allowed hosts or origins could only refuse every request, and what to write instead; None if they can
    match. A Host header names the port unless it is 80, an Origin its scheme."""
    for host in hosts:
        name, _, after = host.rpartition(":") if not host.endswith("]") else (host, "", "")
        if not name or not after or (after != "*" and not after.isdigit()):
            if port == 80 and not host.endswith(":"):
                continue  # clients of port 80 send the bare name
            bare = host.rstrip(":")
            return (f"--allowed-hosts (SCREENSHOT_MCP_ALLOWED_HOSTS): {host!r} names no port, and a client's Host "
                    f"header does: write {bare}:{port} (this server's port) or {bare}:* (any port).")
    for origin in origins:
        if not origin.startswith(("http://", "https://")) or origin.endswith("/"):
            bare = origin.split("://", 1)[-1].rstrip("/")
            return (f"--allowed-origins (SCREENSHOT_MCP_ALLOWED_ORIGINS): {origin!r} is not an Origin header as a "
                    f"browser sends it (scheme, host, port if any; no path): write http://{bare} or https://{bare}.")
    return None


def _listed(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]
