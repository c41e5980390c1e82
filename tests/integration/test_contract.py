"""The OpenAPI as a contract, as an integrator's tester reads it: schemathesis's own CLI (pinned in the
test dependencies) against the served `/openapi.json`, every phase (the document's examples, coverage of each
parameter's edges, fuzzing, stateful sequences along the document's links) and every check (no server error,
documented status codes, media types, headers and bodies, negative data refused, positive data accepted, the
key enforced, `Allow` on 405...). Bounded: a few examples per operation, waits drawn from short values. Run in a
network namespace of its own with only loopback (tests/support/contract_run.py), so what a generated request
names reaches nothing but the service and its test site there.
"""

from __future__ import annotations

import pytest

from tests.integration.conftest import ContractRun

pytestmark = pytest.mark.browser


def test_schemathesis_finds_no_contract_failure(contract_run: ContractRun) -> None:
    """Started with the run (tests/support/background.py: about 14,000 requests, a minute of one core),
    joined here."""
    if contract_run.unavailable:
        pytest.skip(f"the contract run needs a network namespace of its own: {contract_run.unavailable}")
    status, output = contract_run.result()
    assert status == 0, output[-8000:]
    assert " passed" in output and "Custom check failed" not in output, output[-3000:]
