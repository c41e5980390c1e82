"""A real upstream proxy for the tests of `proxy` and `ip_country_code`: Debian's tinyproxy, on a loopback address
of its own."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx

from tests.support.servers import free_port, wait_for

PROXY_HOST = "127.0.0.3"  # the proxies' own loopback address, opened by the allowlist


def start_tinyproxy(directory: Path, basic_auth: str | None) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    config = directory / f"tinyproxy-{port}.conf"
    lines = [f"Port {port}", f"Listen {PROXY_HOST}", "Timeout 30", "MaxClients 20", "Allow 127.0.0.0/8",
             "LogLevel Critical", 'ViaProxyName "tinyproxy-test"']
    if basic_auth:
        lines.append(f"BasicAuth {basic_auth}")
    config.write_text("\n".join(lines) + "\n")
    process = subprocess.Popen(["tinyproxy", "-d", "-c", str(config)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)

    def listening() -> bool:
        with httpx.Client(proxy=f"http://{PROXY_HOST}:{port}", timeout=2) as client:
            client.get(f"http://{PROXY_HOST}:1/")  # any answer from the proxy means it is up
        return True

    wait_for(listening, 10, "tinyproxy")
    return process, port
