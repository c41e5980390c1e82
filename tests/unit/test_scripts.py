"""The Lua protocol: every script of the code is a LuaScript whose head declares its KEYS and ARGV, the body uses no
more than it declares, and every caller passes as many keys and arguments as its script declares."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import render
import service
from render.queue.scripts import REST, LuaScript, ScriptCallError

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("render", "service", "storage", "animate")


def _scripts() -> dict[str, LuaScript]:
    found: dict[str, LuaScript] = {}
    for package in (render, service):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if module.name.startswith(("service.api.playground", "service.cli")):
                continue
            loaded = importlib.import_module(module.name)
            for value in vars(loaded).values():
                if isinstance(value, LuaScript):
                    found[value.name] = value
    return found


SCRIPTS = _scripts()


def test_the_queue_s_scripts_are_all_found() -> None:
    assert {"OFFER", "TAKE", "START", "CANCEL", "DONE", "TAKE_BACK", "WAITING", "HOLD", "SETTLE",
            "CREATE_WITHIN", "BY_ACCESS_KEY", "RELEASE_LOCK"} <= set(SCRIPTS)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_script_s_head_declares_what_its_body_uses(name: str) -> None:
    script = SCRIPTS[name]
    head = script.source.split("\n")
    assert head[0] == f"-- {name}"
    for kind, declared in (("KEYS", script.keys), ("ARGV", script.args)):
        lines = [line for line in head if line.startswith(f"-- {kind}[")]
        assert len(lines) == len(declared), lines
        used = {int(n) for n in re.findall(rf"\b{kind}\[(\d+)\]", script.source.split("-- returns:", 1)[1])}
        variadic = bool(declared) and declared[-1].endswith(REST)
        if not variadic:
            assert used <= set(range(1, len(declared) + 1)), f"{name} uses {kind} {sorted(used)}"
        if re.search(rf"ipairs\({kind}\)|unpack\({kind}|#{kind}\b", script.source):
            assert variadic, f"{name} reads {kind} as a list but declares no rest"
    assert any(line.startswith("-- returns: ") for line in head)


def test_a_call_with_other_counts_is_refused() -> None:
    script = SCRIPTS["START"]
    with pytest.raises(ScriptCallError, match="START takes 3 keys, was given 2"):
        script.check(["a", "b"], ["1", "2", "3", "4", "5"])
    with pytest.raises(ScriptCallError, match="5 arguments, was given 6"):
        script.check(["a", "b", "c"], ["1", "2", "3", "4", "5", "6"])
    offer = SCRIPTS["OFFER"]
    offer.check(["record"], list(range(8)))  # the record's fields are a rest
    offer.check(["record"], list(range(12)))
    with pytest.raises(ScriptCallError, match="at least 8 arguments"):
        offer.check(["record"], list(range(7)))


def test_no_lua_outside_a_declared_script() -> None:
    """Redis is given Lua only through LuaScript: nothing registers or evaluates a script of its own."""
    offenders = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path.name == "scripts.py" and path.parent.name == "queue":
                continue
            text = path.read_text()
            if re.search(r"register_script\(|\.eval\(|\.evalsha\(", text):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def _static_calls() -> list[tuple[str, str, int, int | None, int | None]]:
    """(file, script, line, keys given, args given) for every call of a script whose lists are written out."""
    calls = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text())
            bound: dict[str, str] = {}  # a name or self attribute bound to a script's `.on(...)`
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and _on_call(node.value) is not None:
                    for target in node.targets:
                        bound[ast.unparse(target)] = _on_call(node.value) or ""
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                name = _on_call(node.func) or bound.get(ast.unparse(node.func))
                given = {kw.arg: kw.value for kw in node.keywords}
                if name is None and isinstance(node.func, ast.Attribute) and node.func.attr == "queue" \
                        and _script_name(node.func.value) and len(node.args) == 3:
                    name = _script_name(node.func.value)
                    given = {"keys": node.args[1], "args": node.args[2]}
                if name is None:
                    continue
                calls.append((str(path.relative_to(ROOT)), name, node.lineno,
                              _count(given.get("keys")), _count(given.get("args"))))
    return calls


def _script_name(node: ast.expr) -> str | None:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
    return name if name in SCRIPTS else None


def _on_call(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "on":
        return _script_name(node.func.value)
    return None


def _count(node: ast.expr | None) -> int | None:
    """How many values a written-out list holds (None: not written out, or with a starred part)."""
    if node is None:
        return 0
    if isinstance(node, ast.List) and not any(isinstance(e, ast.Starred) for e in node.elts):
        return len(node.elts)
    return None


def test_every_caller_passes_the_keys_and_arguments_its_script_declares() -> None:
    calls = _static_calls()
    assert len(calls) >= 15, calls  # the callers are found
    checked = 0
    for file, name, line, keys, args in calls:
        script = SCRIPTS[name]
        for given, declared in ((keys, script.keys), (args, script.args)):
            if given is None:
                continue  # built at run time: BoundScript checks it on every call
            variadic = bool(declared) and declared[-1].endswith(REST)
            fixed = len(declared) - variadic
            assert given >= fixed and (variadic or given == fixed), f"{file}:{line} calls {name} with {given}"
            checked += 1
    assert checked >= 15
