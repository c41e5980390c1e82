"""Schemathesis hooks of the contract run (tests/support/contract_run.py, loaded through SCHEMATHESIS_HOOKS).

`key_enforced_as_the_spec_says` stands for schemathesis's `ignored_auth`, which it turns off: the same probes
(every accepted request sent again without its key, and with a made-up key in each of the document's security
schemes), but the refusal read as the spec writes it. The spec answers a missing key with 400
`access_key_required` and a wrong one with 400 `access_key_invalid` (spec, Authentication; the OpenAPI documents
both in each operation's 400), where `ignored_auth` knows only 401 and 403. Any other answer to a probe (a
success, a 5xx, a 400 for another reason) is a failure, as it is for `ignored_auth`.
"""

from __future__ import annotations

import json
from typing import Any

import schemathesis
from schemathesis.specs.openapi._auth_retry import get_security_parameters, remove_auth, send_probe, set_auth_for_case

REFUSALS = {"access_key_required", "access_key_invalid"}
_PROBED: set[str] = set()  # once an operation is shown to enforce its key, as ignored_auth does


def _error_code(response: Any) -> str | None:
    try:
        body = json.loads(response.content)
    except (ValueError, TypeError):
        return None
    return body.get("error_code") if isinstance(body, dict) else None


@schemathesis.check
def key_enforced_as_the_spec_says(ctx: Any, response: Any, case: Any) -> bool | None:
    if not 200 <= response.status_code < 300 or case.operation.label in _PROBED:
        return None
    parameters = get_security_parameters(case.operation)
    if not parameters:
        return None
    probes = [("without a key", remove_auth(case, parameters))]
    for parameter in parameters:
        probe = remove_auth(case, parameters)
        set_auth_for_case(probe, parameter)
        probes.append((f"with a made-up key in {parameter.location.value} {parameter.name}", probe))
    for what, probe in probes:
        answer = send_probe(ctx, case, probe)
        code = _error_code(answer)
        if answer.status_code not in (401, 403) and not (answer.status_code == 400 and code in REFUSALS):
            raise AssertionError(
                f"{case.operation.label} answered a request {what} {answer.status_code} ({code}): the spec refuses "
                f"it with 400 access_key_required or access_key_invalid")
    _PROBED.add(case.operation.label)
    return None
