"""One job's traffic as the egress proxy sees it: the upstream proxy it is chained to, the origins it
reached (wiped after the job) and the connections the policy refused."""

from __future__ import annotations

import base64
import fnmatch
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

REFUSED_HEADER = "x-screenshot-egress"  # marks the proxy's own refusals, so the capture can tell them apart


@dataclass(frozen=True)
class Upstream:
    """The proxy a job's traffic is chained to (`proxy` or `ip_country_code`), already resolved."""

    host: str
    address: str
    port: int
    authorization: str | None  # a Proxy-Authorization value
    bypass: tuple[str, ...] = ()  # host patterns reached directly (`proxy_bypass_hosts`), lower case

    def serves(self, host: str) -> bool:
        """Whether a connection to `host` goes through this proxy: not when a bypass pattern matches it
        (`example.com` itself, `*.example.com` or `.example.com` its subdomains)."""
        host = host.lower().rstrip(".")
        return not any(fnmatch.fnmatchcase(host, pattern) or (pattern.startswith(".") and host.endswith(pattern))
                       for pattern in self.bypass)

    @classmethod
    def parse(cls, url: str) -> tuple[str, int, str | None]:
        """(host, port, Proxy-Authorization) of `http://user:password@host:port/`."""
        parts = urlsplit(url)
        credentials = None
        if parts.username is not None:
            raw = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            credentials = "Basic " + base64.b64encode(raw.encode()).decode()
        return parts.hostname or "", parts.port or 80, credentials


@dataclass(frozen=True)
class Refusal:
    """A connection the policy stopped."""

    host: str
    reason: str
    kind: str = "policy"  # policy (refused by the network policy), unresolved or unreachable


@dataclass
class JobTraffic:
    """What one job's connections did: its upstream, the origins reached and the refusals."""

    upstream: Upstream | None = None

    def upstream_for(self, host: str) -> Upstream | None:
        """The proxy a connection to `host` goes through, if any."""
        return self.upstream if self.upstream is not None and self.upstream.serves(host) else None
    origins: set[str] = field(default_factory=set)  # to wipe afterwards
    refusals: list[Refusal] = field(default_factory=list)


def origin_of(scheme: str, host: str, port: str) -> str:
    """`scheme://host[:port]` as browsers write origins (default ports left out, IPv6 in brackets)."""
    default = {"https": "443", "http": "80"}[scheme]
    name = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"{scheme}://{name.lower()}" + ("" if port == default else f":{port}")


def web_origin(url: str) -> str | None:
    """The origin of an http(s) address, written as `_origin` writes them; None for any other."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return origin_of(parts.scheme, parts.hostname, str(port or {"http": 80, "https": 443}[parts.scheme]))
