"""Which addresses captures may reach (docs/security.md), and how names are resolved.

Denied unless SCREENSHOT_ALLOW_PRIVATE_NETWORKS is on: loopback, RFC 1918, link-local (cloud
metadata included), CGNAT, unique-local, multicast, unspecified, reserved and IPv4-mapped forms of
them, and any name resolving to one. Operators open specific internal targets with
SCREENSHOT_ALLOWED_NETWORKS (CIDRs, or host names matched exactly). The main URL is checked before
navigation for a clear error; every connection the browser makes goes through the egress proxy
(`render.net.egress`), which resolves, checks and connects to the very address it checked, so a name that
changes its answer between check and connect (DNS rebinding) never reaches a private address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from render.contract.errors import ErrorDetail, NameNotResolved, RequestNotValid
from render.settings import IPAddress, IPNetwork, RenderSettings, parse_allowed, parse_overrides

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


async def check_url(field: str, url: str, policy: NetworkPolicy, *, unresolvable_is_invalid: bool = False) -> None:
    """Refuse, as `request_not_valid` naming `field`, a URL on a private or local network before anything
    connects to it (the main `url` before navigation, a `webhook_url` when the request comes in). A name
    that does not resolve raises `NameNotResolved`, or with `unresolvable_is_invalid` is refused too."""
    host = urlsplit(url).hostname or ""
    try:
        await policy.checked_address(host)
    except AddressNotAllowed as refused:
        raise RequestNotValid(
            f"{field}: {refused}. Operators can open it with SCREENSHOT_ALLOWED_NETWORKS or, for development, "
            "SCREENSHOT_ALLOW_PRIVATE_NETWORKS=true.", [ErrorDetail(field, "address not allowed")]) from None
    except NameNotResolved as error:
        if not unresolvable_is_invalid:
            raise
        raise RequestNotValid(f"{field}: {error.message}", [ErrorDetail(field, "not resolvable")]) from None
