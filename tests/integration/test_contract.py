"""The OpenAPI as a contract, as an integrator's tester reads it (issue 51): schemathesis's own CLI (pinned in the
test dependencies) against the served `/openapi.json`, every phase (the document's examples, coverage of each
parameter's edges, fuzzing, stateful sequences along the document's links) and every check (no server error,
documented status codes, media types, headers and bodies, negative data refused, positive data accepted, the
key enforced, `Allow` on 405...). Bounded: a few examples per operation, waits drawn from short values. Run in a
network namespace of its own with only loopback (tests/support/contract_run.py), so what a generated request
names reaches nothing but the service and its test site there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.network import available
from tests.support.servers import ROOT

pytestmark = pytest.mark.browser
EXAMPLES = 3  # per operation in fuzzing (coverage makes its own: about 14,000 cases in all, 55 s here)
SEED = 51  # a failure repeats with the same draws
WORKERS = 2  # schemathesis's concurrent clients


@pytest.mark.timeout(900)
def test_schemathesis_finds_no_contract_failure(tmp_path: Path) -> None:
    why = available()
    if why:
        pytest.skip(f"the contract run needs a network namespace of its own: {why}")
    run = subprocess.run(["unshare", "--net", sys.executable, "-m", "tests.support.contract_run", str(tmp_path),
                          "--max-examples", str(EXAMPLES), "--seed", str(SEED), "--workers", str(WORKERS)],
                         cwd=ROOT, timeout=840, capture_output=True)
    written = tmp_path / "output.txt"
    output = written.read_text(errors="replace") if written.exists() else ""
    assert run.returncode == 0, (output[-8000:] or run.stderr.decode(errors="replace")[-3000:])
    assert " passed" in output and "Custom check failed" not in output, output[-3000:]
