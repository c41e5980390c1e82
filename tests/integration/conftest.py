"""What the integration tests that join work started with the run read of it (tests/support/background.py):
the contract run and the official TypeScript MCP client's scenario, each on a service of its own."""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx
import pytest

from tests.conftest import background_of
from tests.support import background
from tests.support.background import LATE_SECONDS, Outcome


@dataclass
class TypeScriptRun:
    """The official TypeScript MCP client's scenario (tests/sdk/mcp_client.mjs), running or done."""

    outcome: Outcome

    def result(self) -> tuple[int, dict[str, object] | None, str]:
        """(exit status, what it printed, the end of its error output), once it is done."""
        status = self.outcome.status(timeout=LATE_SECONDS + 300)
        errors = self.outcome.read("client.err")[-3000:]
        return status, (json.loads(self.outcome.read("client.out")) if status == 0 else None), errors

    @property
    def sides(self) -> int:
        return int(json.loads(self.outcome.read("service.json"))["sides"])

    def used(self) -> int:
        service = json.loads(self.outcome.read("service.json"))
        answer = httpx.get(f"{service['url']}/v1/screenshot/usage", params={"access_key": service["key"]}, timeout=30)
        return int(answer.json()["used"])


@pytest.fixture
def typescript_mcp_run(request: pytest.FixtureRequest) -> TypeScriptRun:
    return TypeScriptRun(background_of(request, background.TYPESCRIPT_TEST))


@dataclass
class ContractRun:
    """tests/support/contract_run.py running in a network namespace of its own, or why it could not."""

    outcome: Outcome

    def result(self) -> tuple[int, str]:
        """(the CLI's exit status, its output), once it is done."""
        status = self.outcome.status(timeout=900)
        output = self.outcome.read("output.txt") or self.outcome.read("processes.log")  # else it never got to the CLI
        return status, output

    @property
    def unavailable(self) -> str:
        """Why there is no network namespace for it (once it has decided), or ""."""
        self.outcome.status(timeout=900)
        return self.outcome.read("unavailable")


@pytest.fixture
def contract_run(request: pytest.FixtureRequest) -> ContractRun:
    return ContractRun(background_of(request, background.CONTRACT_TEST))
