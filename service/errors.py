"""Errors raised by the API itself: credentials, signatures, limits, body size, overload."""

from __future__ import annotations

from render.contract.errors import ServiceError, TemporaryUnavailable

__all__ = ["TemporaryUnavailable"]


class AccessKeyRequired(ServiceError):
    code = "access_key_required"
    status = 400


class AccessKeyInvalid(ServiceError):
    code = "access_key_invalid"
    status = 400


class SignatureRequired(ServiceError):
    code = "signature_is_required"
    status = 400


class SignatureNotValid(ServiceError):
    code = "signature_is_not_valid"
    status = 400


class ScreenshotsLimitReached(ServiceError):
    code = "screenshots_limit_reached"
    status = 400


class ConcurrencyLimitReached(ServiceError):
    code = "concurrency_limit_reached"
    status = 400


class RequestBodyTooLarge(ServiceError):
    code = "request_body_too_large"
    status = 413


class JobNotFound(ServiceError):
    """GET /jobs/{reference} for a job this organisation does not have (the spec has no not-found code)."""

    code = "request_not_valid"
    status = 404


class MonitorNotFound(ServiceError):
    """A monitor this organisation does not have."""

    code = "request_not_valid"
    status = 404


class RouteNotFound(ServiceError):
    """A path this API does not serve (the spec has no not-found code)."""

    code = "request_not_valid"
    status = 404


class MethodNotAllowed(ServiceError):
    """A served path asked with a method it does not take."""

    code = "request_not_valid"
    status = 405
