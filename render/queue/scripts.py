"""A Lua script of the queue with its protocol written at its head: what each KEYS[i] and ARGV[i] is and what it
returns, in the script's own text, and the count of keys and arguments checked on every call.

Each script is declared where it is used (render.queue.lane_scripts, render.queue.ledger, ...); its return codes
are named by an IntEnum beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

REST = "..."  # a declared name that ends with this takes any number of values (the last only)


class ScriptCallError(TypeError):
    """A script called with other keys or arguments than it declares."""


class LuaScript:
    """One script: its declared KEYS and ARGV, what it returns, and its source with them as its first lines."""

    def __init__(self, name: str, *, keys: Sequence[str] = (), args: Sequence[str] = (), returns: str,
                 body: str) -> None:
        self.name = name
        self.keys = tuple(keys)
        self.args = tuple(args)
        self.returns = returns
        head = [f"-- {name}"]
        head += [f"-- {_slot('KEYS', i, what)}" for i, what in enumerate(self.keys, 1)]
        head += [f"-- {_slot('ARGV', i, what)}" for i, what in enumerate(self.args, 1)]
        head.append(f"-- returns: {returns}")
        self.source = "\n".join(head) + "\n" + body.lstrip("\n")

    def check(self, keys: Sequence[Any], args: Sequence[Any]) -> None:
        """Raise ScriptCallError unless `keys` and `args` are as many as declared."""
        for what, declared, given in (("keys", self.keys, keys), ("arguments", self.args, args)):
            rest = bool(declared) and declared[-1].endswith(REST)
            fixed = len(declared) - rest
            if len(given) < fixed or (not rest and len(given) > fixed):
                raise ScriptCallError(f"{self.name} takes {'at least ' if rest else ''}{fixed} {what}, "
                                      f"was given {len(given)}")

    def on(self, client: Any) -> BoundScript:
        """The script registered on a Redis client (sync or asyncio): called as `bound(keys=..., args=...)`."""
        return BoundScript(self, client.register_script(self.source))

    def queue(self, pipe: Any, keys: Sequence[Any], args: Sequence[Any]) -> None:
        """The script queued on a pipeline, by EVAL (a pipeline with a registered script asks Redis first
        whether it knows the script: one more round trip)."""
        self.check(keys, args)
        pipe.eval(self.source, len(keys), *keys, *args)

    def __repr__(self) -> str:
        return f"LuaScript({self.name})"


class BoundScript:
    """A script registered on one client; each call checks its keys and arguments against the declaration."""

    def __init__(self, script: LuaScript, registered: Any) -> None:
        self.script = script
        self._registered = registered

    def __call__(self, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Any:
        self.script.check(keys, args)
        return self._registered(keys=list(keys), args=list(args))


def _slot(kind: str, index: int, what: str) -> str:
    if what.endswith(REST):
        return f"{kind}[{index}..]: {what[:-len(REST)].rstrip()}"
    return f"{kind}[{index}]: {what}"


RELEASE_LOCK = LuaScript(
    "RELEASE_LOCK", keys=["the lock"], args=["its holder"],
    returns="1 when the holder released it; 0 when another holds it, or nobody",
    body="if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0")
