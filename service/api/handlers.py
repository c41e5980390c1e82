"""The API's exception handlers: every refusal and failure answers the JSON error body (docs/using.md, Errors), never
the framework's own, and an unexpected one answers 500 with its trace id logged."""

from __future__ import annotations

import logging

import redis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from render.contract.errors import ErrorDetail, InternalError, RequestNotValid, ServiceError
from service.api.error_answer import error_response
from service.errors import MethodNotAllowed, RouteNotFound, TemporaryUnavailable

log = logging.getLogger(__name__)
METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")  # what a 405's Allow may name
# The refusals of a request the service could serve later (screenshot_refusals_total, by reason).
LOAD_REFUSALS = {"temporary_unavailable", "concurrency_limit_reached", "screenshots_limit_reached"}


def allowed_methods(request: Request) -> list[str]:
    """The methods the request's path has routes for (RFC 9110's Allow), over every route of the path (Starlette
    names only the first one's): each method tried against the app's routes."""
    routes = request.app.router.routes
    return [method for method in METHODS
            if any(route.matches({**request.scope, "method": method})[0] == Match.FULL for route in routes)]


def install(app: FastAPI) -> None:
    """Answer every error of `app` with the error body."""

    def refused(request: Request, reason: str) -> None:
        context = getattr(request.app.state, "context", None)
        if context is not None:
            context.metrics.refusals.labels(reason).inc()

    @app.exception_handler(ServiceError)
    async def service_error(request: Request, error: ServiceError) -> JSONResponse:
        if error.code in LOAD_REFUSALS:
            refused(request, error.reason or error.code)
        if error.report:
            log.error("%s: %s (trace %s)", error.code, error.message, getattr(request.state, "trace_id", ""))
        return error_response(error, getattr(request.state, "trace_id", None))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        # Unknown paths and wrong methods answer with the error body too, never the framework's own.
        trace_id = getattr(request.state, "trace_id", None)
        where = f"{request.method} {request.url.path}"
        if error.status_code == 405:
            allowed = allowed_methods(request)
            return error_response(MethodNotAllowed(
                f"{where}: method not allowed (allowed: {', '.join(allowed)}); see /docs for the routes."),
                trace_id, {"allow": ", ".join(allowed)})
        if error.status_code == 404:
            return error_response(RouteNotFound(f"{where}: no such route; see /docs for the routes."), trace_id)
        log.error("unexpected HTTP error %s on %s (trace %s)", error.status_code, where, trace_id)
        return error_response(InternalError(), trace_id)

    @app.exception_handler(RequestValidationError)
    async def invalid_route_parameter(request: Request, error: RequestValidationError) -> JSONResponse:
        # Parameters FastAPI checks itself (the signed links' `expires`): request_not_valid by name, not 422.
        details = [ErrorDetail(str(problem["loc"][-1]), str(problem["msg"])) for problem in error.errors()]
        names = ", ".join(detail.field for detail in details)
        return error_response(RequestNotValid(f"Parameters not valid: {names}.", details),
                              getattr(request.state, "trace_id", None))

    @app.exception_handler(redis.RedisError)
    async def redis_unavailable(request: Request, error: redis.RedisError) -> JSONResponse:
        trace_id = getattr(request.state, "trace_id", None)
        log.warning("redis unavailable: %s (trace %s)", type(error).__name__, trace_id)
        refused(request, "redis_unavailable")
        return error_response(TemporaryUnavailable(
            "The service's queue store (Redis) is unreachable; retry shortly."), trace_id)

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, error: Exception) -> JSONResponse:
        trace_id = getattr(request.state, "trace_id", None)
        log.exception("unexpected error (trace %s)", trace_id)
        return error_response(InternalError(), trace_id)
