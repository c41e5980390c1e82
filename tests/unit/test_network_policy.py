"""The network policy's decisions, address by address."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from render.contract.errors import NameNotResolved, RequestNotValid
from render.net.policy import (
    AddressNotAllowed,
    NetworkPolicy,
    check_url,
    is_public_address,
)
from render.settings import parse_allowed, parse_overrides


@pytest.mark.parametrize(("address", "public"), [
    ("127.0.0.1", False), ("10.1.2.3", False), ("172.16.0.1", False), ("192.168.1.1", False),
    ("169.254.169.254", False), ("100.64.0.1", False), ("0.0.0.0", False), ("224.0.0.1", False),
    ("::1", False), ("fe80::1", False), ("fc00::1", False), ("::ffff:127.0.0.1", False), ("::", False),
    ("ff02::1", False), ("8.8.8.8", True), ("93.184.216.34", True), ("2606:4700::1111", True),
    ("::ffff:8.8.8.8", True),
])
def test_public_addresses(address: str, public: bool) -> None:
    assert is_public_address(ipaddress.ip_address(address)) is public


def test_overrides_and_turns() -> None:
    policy = NetworkPolicy(overrides=parse_overrides("a.test=10.0.0.1, b.test=127.0.0.2|127.0.0.1"))

    async def main() -> list[str]:
        return [str((await policy.resolve(h))[0]) for h in ("a.test", "B.TEST", "b.test", "b.test", "10.9.9.9")]

    assert asyncio.run(main()) == ["10.0.0.1", "127.0.0.2", "127.0.0.1", "127.0.0.2", "10.9.9.9"]
    with pytest.raises(ValueError, match="is not host=ip"):
        parse_overrides("nohost")


def test_allowlist_by_network_and_by_exact_name() -> None:
    networks, hosts = parse_allowed("10.1.0.0/16, intranet.example ,127.0.0.2")
    policy = NetworkPolicy(allowed_networks=networks, allowed_hosts=hosts)
    assert policy.allows("x", ipaddress.ip_address("10.1.200.3"))
    assert not policy.allows("x", ipaddress.ip_address("10.2.0.1"))
    assert policy.allows("intranet.example", ipaddress.ip_address("192.168.0.5"))
    assert not policy.allows("sub.intranet.example", ipaddress.ip_address("192.168.0.5"))
    assert policy.allows("y", ipaddress.ip_address("127.0.0.2"))
    assert NetworkPolicy(allow_private=True).allows("z", ipaddress.ip_address("127.0.0.1"))


def test_special_use_names_need_no_dns() -> None:
    policy = NetworkPolicy()
    assert [str(a) for a in asyncio.run(policy.resolve("LOCALHOST"))] == ["127.0.0.1", "::1"]
    assert [str(a) for a in asyncio.run(policy.resolve("app.localhost"))] == ["127.0.0.1", "::1"]
    from render.contract.errors import NameNotResolved

    with pytest.raises(NameNotResolved, match="never resolve"):
        asyncio.run(policy.resolve("anything.invalid"))


def test_a_name_with_any_private_answer_is_refused() -> None:
    policy = NetworkPolicy(overrides={"mixed.test": [ipaddress.ip_address("8.8.8.8")]})
    asyncio.run(policy.checked_address("mixed.test"))
    policy.overrides["mixed.test"] = [ipaddress.ip_address("127.0.0.1")]
    with pytest.raises(AddressNotAllowed, match="127.0.0.1"):
        asyncio.run(policy.checked_address("mixed.test"))
    with pytest.raises(RequestNotValid, match="SCREENSHOT_ALLOWED_NETWORKS"):
        asyncio.run(check_url("url", "http://mixed.test/", policy))


def test_one_check_serves_the_capture_url_and_the_webhook_naming_each() -> None:
    policy = NetworkPolicy(overrides={"inside.test": [ipaddress.ip_address("10.0.0.8")]})
    with pytest.raises(RequestNotValid) as refused:
        asyncio.run(check_url("webhook_url", "http://inside.test/hook", policy, unresolvable_is_invalid=True))
    assert [(d.field, d.message) for d in refused.value.details] == [("webhook_url", "address not allowed")]
    assert refused.value.message.startswith("webhook_url: the address 10.0.0.8 of inside.test is not allowed")
    with pytest.raises(RequestNotValid) as unresolvable:
        asyncio.run(check_url("webhook_url", "http://nowhere.invalid/", policy, unresolvable_is_invalid=True))
    assert [(d.field, d.message) for d in unresolvable.value.details] == [("webhook_url", "not resolvable")]
    with pytest.raises(NameNotResolved):  # the capture's own URL: a network error of the target, not the request's
        asyncio.run(check_url("url", "http://nowhere.invalid/", policy))
