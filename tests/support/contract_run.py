"""Schemathesis's own CLI against the service's OpenAPI, every phase and every check: run by
tests/integration/test_contract.py inside a network namespace of its own with only loopback (`unshare --net`),
so nothing a generated request names can be reached but what this script starts there: Redis, the service (one
worker) and the test site its URL-valued fields point at.

`python -m tests.support.contract_run OUT_DIR [schemathesis run options...]`: writes OUT_DIR/schemathesis.toml
and the CLI's own output (OUT_DIR/output.txt, its JUnit report), and exits with the CLI's status.

What the configuration says, and why (the rest is the CLI's defaults: every check, positive and negative data):
- the key through the document's own security scheme (AccessKeyHeader), and `ignored_auth` replaced by a check
  that reads the spec's refusal of a missing or wrong key (400, not 401/403) as such (contract_hooks.py);
- URL-valued parameters usually the test site's pages (else what the generator makes, refused or unreachable);
- path parameters usually what exists: an async job made and done before the run, a monitor (paused), the
  error codes (else what the generator makes: 404);
- the parameters that make a capture wait (timeouts, delays, durations) drawn from short values, so every case
  ends in seconds;
- `positive_data_acceptance`: a schema-valid request of the capture routes may still be refused 400 for what
  a schema cannot say (exactly one of url, html and markdown; the cross-field rules of docs/using.md, Parameters), and
  a reference nobody made is 404, a stored result's link with a signature not made by the service is 400:
  those statuses are the documented answers there, not failures.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from service.api import error_reference
from tests.conftest import create_org
from tests.support.servers import redis_server, running_service
from tests.support.site import Site

PAGES = ("/colours.html", "/article.html", "/tall.html")
SHORT = {  # parameters that make a capture wait, and the values the run draws them from
    "timeout": [4, 8], "navigation_timeout": [2, 4], "delay": [0, 1], "duration": [1], "scroll_duration": [500],
    "scroll_delay": [0, 100], "wait_for_selector_timeout": [1, 2], "scroll_start_delay": [0],
}
# Operations whose schema-valid requests a cross-field rule may refuse (400), or that name a resource by
# reference (404 for one nobody made), as docs/using.md documents.
REFUSING = ("/v1/screenshot/take", "/v1/screenshot/animate", "/v1/screenshot/bulk", "/v1/screenshot/compare",
            "/v1/monitors")
NAMING = ("/v1/screenshot/jobs/", "/v1/monitors/")
# A stored result's link is signed by the service: any other signature is refused (400 signature_is_not_valid).
SIGNED = ("/v1/screenshot/files/", "/v1/screenshot/slices/")


def _list(values: Sequence[object]) -> str:
    return "[" + ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in values) + "]"


def made_for_the_run(url: str, key: str, site: Site) -> dict[str, list[str]]:
    """What the path parameters name, made before the run so that its cases reach real ones, not only 404s: an
    async job that is done, a monitor (paused: its runs would take the run's one worker), the error codes."""
    with httpx.Client(base_url=url, timeout=60, headers={"x-access-key": key}) as http:
        accepted = http.get("/v1/screenshot/take", params={"url": site.url(PAGES[0]), "async": "true"})
        accepted.raise_for_status()
        reference = accepted.json()["reference"]
        deadline = time.monotonic() + 60
        while http.get(f"/v1/screenshot/jobs/{reference}").json()["status"] != "done":
            if time.monotonic() > deadline:
                raise TimeoutError(f"the run's async job {reference} was not done within 60 s")
            time.sleep(0.1)
        monitor = http.post("/v1/monitors", json={"request": {"url": site.url(PAGES[0])},
                                                  "schedule": {"interval": 60}, "paused": True})
        monitor.raise_for_status()
    return {"reference": [reference], "monitor_id": [monitor.json()["id"]], "code": error_reference.codes()}


def config(site: Site, made: dict[str, list[str]]) -> str:
    """The run's schemathesis.toml."""
    lines = ["# Written by tests/support/contract_run.py.", "", "[auth.openapi.AccessKeyHeader]",
             'api_key = "${SCREENSHOT_CONTRACT_KEY}"', "", "[dictionaries.pages]",
             f"values = {_list([site.url(page) for page in PAGES])}", ""]
    for name, values in {**SHORT, **made}.items():
        lines += [f"[dictionaries.{name}]", f"values = {_list(values)}", ""]
    lines += ["[parameters]", '"query.url" = { dictionary = "pages", probability = 0.8 }',
              '"body.url" = { dictionary = "pages", probability = 0.8 }']
    for name in SHORT:
        lines += [f'"query.{name}" = {{ dictionary = "{name}" }}', f'"body.{name}" = {{ dictionary = "{name}" }}']
    for name in made:
        lines.append(f'"path.{name}" = {{ dictionary = "{name}", probability = 0.8 }}')
    lines.append("")
    for path in REFUSING:
        lines += ["[[operations]]", f'include-path = "{path}"',
                  'checks.positive_data_acceptance.expected-statuses = ["2XX", 400, 404]', ""]
    for prefix in NAMING:
        lines += ["[[operations]]", f'include-path-regex = "^{prefix}"',
                  'checks.positive_data_acceptance.expected-statuses = ["2XX", 404]', ""]
    for prefix in SIGNED:
        lines += ["[[operations]]", f'include-path-regex = "^{prefix}"',
                  'checks.positive_data_acceptance.expected-statuses = ["2XX", 400]', ""]
    return "\n".join(lines)


def main(out_dir: Path, options: list[str]) -> int:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    with tempfile.TemporaryDirectory() as temporary:
        data = Path(temporary)
        (data / "redis").mkdir()
        with redis_server(data / "redis") as redis_url, Site() as site, running_service(
                redis_url, data, workers=1, SCREENSHOT_RESULT_WAIT_GRACE="2",
                SCREENSHOT_WEBHOOK_RETRY_SCHEDULE="1") as service:
            org = asyncio.run(create_org(redis_url, quota=1_000_000, concurrency=50))
            made = made_for_the_run(service.url, org.access_key, site)
            (out_dir / "schemathesis.toml").write_text(config(site, made))
            command = [str(Path(sys.executable).with_name("schemathesis")), "--config-file",
                       str(out_dir / "schemathesis.toml"), "run", f"{service.url}/openapi.json", "--checks", "all",
                       "--exclude-checks", "ignored_auth", "--phases", "examples,coverage,fuzzing,stateful",
                       "--no-color", "--report", "junit", "--report-dir", str(out_dir), *options]
            environment = {"SCREENSHOT_CONTRACT_KEY": org.access_key, "PATH": "/usr/bin:/bin", "HOME": str(data),
                           "SCHEMATHESIS_HOOKS": "tests.support.contract_hooks",
                           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
            with (out_dir / "output.txt").open("wb") as output:
                return subprocess.run(command, env=environment, stdout=output, stderr=subprocess.STDOUT,
                                      cwd=out_dir).returncode


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
