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
    serve(api, key, args.transport, args.host, args.port, _listed(args.allowed_hosts), _listed(args.allowed_origins))
    return 0


def _listed(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]
