"""The JSON error answer every refusal gets, for the middleware that answers before a route (the routes'
errors go through the app's exception handlers, which use it too)."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from render.contract.errors import ServiceError


def error_response(error: ServiceError, trace_id: str | None = None,
                   extra_headers: dict[str, str] | None = None) -> JSONResponse:
    """The JSON error body (docs/using.md, Errors) with the error's status (and `extra_headers`: a 405's Allow)."""
    headers = {"x-service-error-code": error.code, **(extra_headers or {})}
    if error.retry_after is not None:
        headers["retry-after"] = str(error.retry_after)
    if trace_id:
        headers["x-service-trace-id"] = trace_id
    return JSONResponse(error.to_payload(), status_code=error.status, headers=headers)
