"""Hosts that share nothing but a network, on one machine: a Linux network namespace per host, each with
one interface on a bridge in a namespace of its own, on a small subnet with no default route and no NAT,
so no packet can leave them. The test process joins the bridge too (one address on the subnet) to act as
the clients. Everything is created here and removed on exit, whatever happened.

Servers written in Python that the test runs itself (the site, the webhook receiver) are put on a host
with `inside(host)`: a network namespace belongs to a thread, and a socket to the namespace it was made in,
so a listening socket opened inside serves that host's address from the test process's own threads.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO

CLONE_NEWNET = 0x40000000


def available() -> str:
    """'' when this process may make network namespaces, else why not (for a skip message)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "`ip` (Debian's iproute2) is not installed"
    probe = f"ssprobe{secrets.token_hex(3)}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=30)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
    return ""


def _setns(path: str) -> None:
    with open(path) as namespace:
        if ctypes.CDLL(None, use_errno=True).setns(namespace.fileno(), CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns({path})")


@contextlib.contextmanager
def inside(host: Host) -> Iterator[None]:
    """This thread in `host`'s network namespace for the block: sockets made in it live on that host."""
    own = f"/proc/self/task/{threading.get_native_id()}/ns/net"
    with open(own) as home:
        _setns(f"/var/run/netns/{host.namespace}")
        try:
            yield
        finally:
            if ctypes.CDLL(None, use_errno=True).setns(home.fileno(), CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


@dataclass
class Host:
    """One namespace: its name, its address on the subnet, and the processes started in it."""

    namespace: str
    address: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside this host."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def start(self, argv: Sequence[str], env: dict[str, str] | None = None,
              log: IO[bytes] | int | None = None) -> subprocess.Popen[bytes]:
        """`argv` started inside this host (its output to `log` when given)."""
        process = subprocess.Popen(self.command(argv), start_new_session=True, env=env, stdout=log,
                                   stderr=subprocess.STDOUT if log is not None else None)
        self.processes.append(process)
        return process

    def pids(self) -> list[int]:
        """Every process whose network namespace is this host's (what `ip netns pids` lists)."""
        done = subprocess.run(["ip", "netns", "pids", self.namespace], capture_output=True, text=True, timeout=10)
        return [int(pid) for pid in done.stdout.split()]

    def crash(self) -> None:
        """The host dies: SIGKILL to everything running in it."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)

    def link(self, up: bool) -> None:
        """Its network cable in or out."""
        _ip("-n", self.namespace, "link", "set", "eth0", "up" if up else "down")


@dataclass
class Network:
    hub: str
    subnet: str  # the first three octets
    client_link: str
    hosts: dict[str, Host]


@contextlib.contextmanager
def network(names: Sequence[str]) -> Iterator[Network]:
    """One host per name on a fresh subnet (10.251.X.0/24), the test process at .1."""
    tag = secrets.token_hex(3)
    subnet = f"10.251.{secrets.randbelow(200) + 20}"
    hub = f"sshub{tag}"
    client_link = f"ssc{tag}"
    made: list[str] = []
    hosts: dict[str, Host] = {}
    try:
        _ip("netns", "add", hub)
        made.append(hub)
        _ip("-n", hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", hub, "link", "set", "br0", "up")
        # The test process's own leg: an address on the subnet, no route beyond it.
        _ip("link", "add", client_link, "type", "veth", "peer", "name", "up0", "netns", hub)
        _ip("-n", hub, "link", "set", "up0", "master", "br0", "up")
        _ip("addr", "add", f"{subnet}.1/24", "dev", client_link)
        _ip("link", "set", client_link, "up")
        for number, name in enumerate(names, start=10):
            namespace = f"ss{tag}{name}"[:15]
            _ip("netns", "add", namespace)
            made.append(namespace)
            _ip("-n", namespace, "link", "set", "lo", "up")
            _ip("-n", namespace, "link", "add", "eth0", "type", "veth", "peer", "name", f"h{number}", "netns", hub)
            _ip("-n", hub, "link", "set", f"h{number}", "master", "br0", "up")
            _ip("-n", namespace, "addr", "add", f"{subnet}.{number}/24", "dev", "eth0")
            _ip("-n", namespace, "link", "set", "eth0", "up")
            hosts[name] = Host(namespace, f"{subnet}.{number}")
        yield Network(hub, subnet, client_link, hosts)
    finally:
        for namespace in made[1:]:
            known = [host for host in hosts.values() if host.namespace == namespace]
            (known[0] if known else Host(namespace, "")).crash()
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("link", "del", client_link)
        for namespace in reversed(made):
            with contextlib.suppress(subprocess.CalledProcessError):
                _ip("netns", "del", namespace)
