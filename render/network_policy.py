"""Which addresses captures may reach (DESIGN §5), and how names are resolved.

Denied unless SCREENSHOT_ALLOW_PRIVATE_NETWORKS is on: loopback, RFC 1918, link-local (cloud
metadata included), CGNAT, unique-local, multicast, unspecified, reserved and IPv4-mapped forms of
them, and any name resolving to one. Operators open specific internal targets with
SCREENSHOT_ALLOWED_NETWORKS (CIDRs, or host names matched exactly). The main URL is checked before
navigation for a clear error; every connection the browser makes goes through the egress proxy
(`render.egress`), which resolves, checks and connects to the very address it checked, so a name that
changes its answer between check and connect (DNS rebinding) never reaches a private address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from render.errors import ErrorDetail, NameNotResolved, RequestNotValid
from render.settings import RenderSettings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_CGNAT = ipaddress.ip_network("100.64.0.0/10")


def is_public_address(address: IPAddress) -> bool:
    """True only for globally routable unicast addresses (IPv4-mapped forms are unwrapped)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return False
    return address.is_global and not address.is_multicast


class AddressNotAllowed(Exception):
    """A host resolved to an address the policy refuses."""

    def __init__(self, host: str, address: IPAddress) -> None:
        super().__init__(f"the address {address} of {host} is not allowed (private or local network)")
        self.host = host
        self.address = address


def parse_overrides(text: str) -> dict[str, list[IPAddress]]:
    """`host=ip,host=ip1|ip2`: fixed answers (with several, successive lookups take them in turn)."""
    overrides: dict[str, list[IPAddress]] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        host, sep, addresses = entry.partition("=")
        if not sep or not host.strip():
            raise ValueError(f"entry {entry!r} is not host=ip (or host=ip1|ip2)")
        try:
            overrides[host.strip().lower()] = [ipaddress.ip_address(a.strip()) for a in addresses.split("|")]
        except ValueError:
            raise ValueError(f"entry {entry!r}: {addresses!r} is not an IP address (or ip1|ip2)") from None
    return overrides


_HOST_NAME = re.compile(r"^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*\.?$")


def parse_allowed(text: str) -> tuple[list[IPNetwork], set[str]]:
    """`10.1.0.0/16,intranet.example`: networks and exact host names opened despite the policy."""
    networks: list[IPNetwork] = []
    hosts: set[str] = set()
    for entry in filter(None, (part.strip() for part in text.split(","))):
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
            continue
        except ValueError:
            pass
        # Not a network: a host name, unless it was meant as an address (digits and dots, a prefix length).
        if "/" in entry or ":" in entry or re.fullmatch(r"[\d.]+", entry) or not _HOST_NAME.match(entry.lower()):
            raise ValueError(f"entry {entry!r} is neither a network (10.1.0.0/16, 192.0.2.7, 2001:db8::/32) "
                             "nor a host name")
        hosts.add(entry.lower())
    return networks, hosts


@dataclass
class NetworkPolicy:
    """Resolution (with overrides) and the allow/deny decision for one worker."""

    allow_private: bool = False
    overrides: dict[str, list[IPAddress]] = field(default_factory=dict)
    allowed_networks: list[IPNetwork] = field(default_factory=list)
    allowed_hosts: set[str] = field(default_factory=set)
    _turns: dict[str, Iterator[IPAddress]] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: RenderSettings) -> NetworkPolicy:
        networks, hosts = parse_allowed(settings.allowed_networks)
        return cls(settings.allow_private_networks, parse_overrides(settings.resolve_overrides), networks, hosts)

    async def resolve(self, host: str) -> list[IPAddress]:
        """The addresses of `host`: an override, a literal, or the system resolver's answer."""
        name = host.strip("[]").lower()
        if name in self.overrides:
            answers = self.overrides[name]
            if len(answers) == 1:
                return answers
            turn = self._turns.setdefault(name, itertools.cycle(answers))
            return [next(turn)]
        try:
            return [ipaddress.ip_address(name)]
        except ValueError:
            pass
        # RFC 6761: these answers are fixed, no DNS server is asked.
        if name == "localhost" or name.endswith(".localhost"):
            return [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
        if name == "invalid" or name.endswith(".invalid"):
            raise NameNotResolved(f"The host {host} could not be resolved (DNS): .invalid names never resolve.")
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(name, None, type=socket.SOCK_STREAM)
        except socket.gaierror as error:
            raise NameNotResolved(f"The host {host} could not be resolved (DNS): {error.strerror}.") from None
        return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]

    def allows(self, host: str, address: IPAddress) -> bool:
        if self.allow_private or is_public_address(address):
            return True
        return host.strip("[]").lower() in self.allowed_hosts or any(address in n for n in self.allowed_networks)

    async def checked_address(self, host: str) -> IPAddress:
        """The address to connect to, after every answer for `host` passed the policy."""
        addresses = await self.resolve(host)
        for address in addresses:
            if not self.allows(host, address):
                raise AddressNotAllowed(host, address)
        return addresses[0]


async def check_main_url(url: str, policy: NetworkPolicy) -> None:
    """Refuse a capture URL on a private or local network before any navigation, by name."""
    host = urlsplit(url).hostname or ""
    try:
        await policy.checked_address(host)
    except AddressNotAllowed as refused:
        raise RequestNotValid(
            f"url: {refused}. Operators can open it with SCREENSHOT_ALLOWED_NETWORKS or, for development, "
            "SCREENSHOT_ALLOW_PRIVATE_NETWORKS=true.", [ErrorDetail("url", "address not allowed")]) from None
