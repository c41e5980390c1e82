"""Which addresses captures may reach (DESIGN §5).

This first layer checks the main URL before navigation: its host must not be, or resolve to, a
loopback, private, link-local, CGNAT, unique-local, multicast or unspecified address, unless
SCREENSHOT_ALLOW_PRIVATE_NETWORKS is on.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from render.errors import NameNotResolved, RequestNotValid
from render.settings import RenderSettings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_CGNAT = ipaddress.ip_network("100.64.0.0/10")


def is_public_address(address: IPAddress) -> bool:
    """True only for globally routable unicast addresses (IPv4-mapped forms are unwrapped)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return False
    return address.is_global and not address.is_multicast


async def resolve(host: str) -> list[IPAddress]:
    """All addresses a host name resolves to (a literal address resolves to itself)."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise NameNotResolved(f"The host {host} could not be resolved (DNS): {error.strerror}.") from None
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


async def check_main_url(url: str, settings: RenderSettings) -> None:
    """Refuse a capture URL whose host is on a private or local network."""
    if settings.allow_private_networks:
        return
    host = urlsplit(url).hostname or ""
    for address in await resolve(host):
        if not is_public_address(address):
            raise RequestNotValid(
                f"url: the address {address} of {host} is not allowed (private or local network). "
                "Operators can allow it with SCREENSHOT_ALLOW_PRIVATE_NETWORKS=true.")
