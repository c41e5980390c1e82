"""The `store` parameters (the hosted API's upload to the caller's own bucket): which go together, which
must be given, and which are credentials (sealed for the job, never stored: render.contract.sealing)."""

from __future__ import annotations

from typing import Any

from render.contract.errors import ErrorDetail

# store=true needs these; the credentials too, checked by the API only (render.contract.request_params.check_store:
# they are sealed apart from the options the worker and webhook deliverer see).
STORAGE_REQUIRED = ("storage_path", "storage_bucket")
STORAGE_CREDENTIALS = ("storage_access_key_id", "storage_secret_access_key")
STORAGE_FIELDS = (*STORAGE_REQUIRED, *STORAGE_CREDENTIALS, "storage_endpoint", "storage_class", "storage_acl",
                  "storage_return_location")


def store_problems(options: Any) -> list[ErrorDetail]:
    """The cross-field problems of a request's `store` parameters (its options model's fields)."""
    named = [name for name in STORAGE_FIELDS if getattr(options, name) not in (None, False)]
    if not options.store:
        return [ErrorDetail(name, "needs store=true") for name in named]
    problems = [ErrorDetail(name, "is required with store=true") for name in STORAGE_REQUIRED
                if getattr(options, name) is None]
    if options.cache:
        problems.append(ErrorDetail("store", "cannot be combined with cache (a cached answer uploads nothing)"))
    return problems
