"""The architecture, checked rather than hoped for (docs/architecture.md): the import contracts of
pyproject.toml, no import circle, an API process that never loads the browser or libvips, small modules."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("service", "animate", "render", "storage")
MAX_MODULE_LINES = 450  # STYLE: aim near 100-200 lines a module, split past ~400


def test_the_import_contracts_hold() -> None:
    run = subprocess.run([str(Path(sys.executable).parent / "lint-imports")], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "BROKEN" not in run.stdout and run.stdout.count("KEPT") >= 8


def test_the_shared_contract_names_every_shared_module() -> None:
    """A module added at service's top is shared by every program: the contract that keeps programs out of it
    must name it, or it would escape unseen."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    shared = next(contract for contract in contracts if contract["id"] == "service-shared")
    top = {f"service.{path.stem}" for path in (ROOT / "service").glob("*.py") if path.stem != "__init__"}
    assert set(shared["source_modules"]) == top
    assert len(top) <= 14, sorted(top)  # more shared modules than this: a package of their own
    framework = next(contract for contract in contracts if contract["id"] == "web-framework")
    assert set(framework["source_modules"]) >= top


@pytest.mark.parametrize("entry", ["service.cli.main", "service.deliverer.main", "service.runner.supervisor",
                                   "service.cli.healthcheck"])
def test_only_the_api_loads_the_web_framework(entry: str) -> None:
    """The command line starts the API lazily; the deliverer, `run` and the healthcheck never load FastAPI."""
    probe = f"import sys, {entry}; print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & {{'fastapi'}})))"
    run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "", f"{entry} loads {run.stdout.strip()}"


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every set of modules that import one another, directly or through others (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in graph.modules or imported.split(".")[0] not in PACKAGES:
                continue
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module.split(".")[0] in PACKAGES and module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_through_others() -> None:
    graph = grimp.build_graph(*PACKAGES)
    assert circles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    graph = grimp.ImportGraph()
    for module in ("render.a", "render.b", "render.c"):
        graph.add_module(module)
    graph.add_import(importer="render.a", imported="render.b")
    graph.add_import(importer="render.b", imported="render.a")
    graph.add_import(importer="render.c", imported="render.a")
    assert circles(graph) == [["render.a", "render.b"]]


@pytest.mark.parametrize("entry", ["service.api.app", "service.deliverer.main", "service.mcp.server",
                                   "service.cli.main", "service.cli.healthcheck"])
def test_the_api_process_loads_no_browser_and_no_libvips(entry: str) -> None:
    probe = (f"import sys, {entry}; "
             "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & {'playwright', 'pyvips', 'ffmpeg'})))")
    run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "", f"{entry} loads {run.stdout.strip()}"


def test_the_worker_does_load_them() -> None:
    """The probe above can fail: the worker's entry point loads both."""
    probe = "import sys, render.worker.main; print('playwright' in sys.modules, 'pyvips' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.stdout.split() == ["True", "True"], run.stderr[-2000:]


@pytest.mark.parametrize(("command", "loads"), [
    (["monitors", "--api", "http://127.0.0.1:9", "--access-key", "k", "list"], False),  # a client of the API
    (["monitors", "--access-key", "k", "list"], True),  # no --api: the settings' base URL
])
def test_a_client_command_loads_the_settings_only_when_it_needs_them(command: list[str], loads: bool) -> None:
    """The settings' models are half of a client command's second of start-up: `monitors --api` runs without
    them (its call to a closed port fails, naming the fix)."""
    probe = ("import sys\nfrom service.cli.main import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n"
             "    print('service.settings' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", probe, *command], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, env={k: v for k, v in os.environ.items() if not k.startswith("SCREENSHOT_")})
    assert run.stdout.split()[-1:] == [str(loads)], (run.stdout, run.stderr[-2000:])


def test_modules_stay_small() -> None:
    large = {str(path.relative_to(ROOT)): lines for package in PACKAGES for path in (ROOT / package).rglob("*.py")
             if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert large == {}, f"split these modules (over {MAX_MODULE_LINES} lines): {large}"


def test_no_string_of_render_animate_or_storage_names_a_service_path() -> None:
    """RQ stores a job function's dotted path in every queued job and import-linter cannot see strings: a
    `service.` path written in render, animate or storage is a back edge that a rename breaks unseen."""
    found = [f"{path.relative_to(ROOT)}:{number}" for package in ("render", "animate", "storage")
             for path in sorted((ROOT / package).rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r"""["'`(]service\.[a-z_]+""", line)]
    assert found == []


def test_every_job_function_the_queue_writes_imports() -> None:
    """The names every queued delivery and monitor run carries import to a function."""
    from rq.utils import import_attribute

    from render.queue import keys

    for name in (keys.DELIVER_FUNCTION, keys.FIRE_FUNCTION):
        assert callable(import_attribute(name)), name
    assert keys.DELIVER_FUNCTION.startswith("render.") and keys.FIRE_FUNCTION.startswith("render.")
