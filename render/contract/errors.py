"""The base error type and the errors a capture can end with, each with its code and HTTP status.

Core code raises these; one exception handler in `service/` turns them into the JSON error body
(the API's own errors, such as credentials and limits, live in `service/errors.py`).
They cross the queue as JSON (`to_payload` / `from_payload`), so a worker's error reaches the
client with the same code and message. This module imports nothing heavy: the API loads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

# Where error bodies point (`documentation_url`): the serving process's own reference (GET /errors/{code},
# service/error_reference.py), set from its public base URL at start (`documentation_at`).
_documentation_base = ""


def documentation_at(base_url: str) -> None:
    """Error bodies of this process link to the error reference under `base_url`."""
    global _documentation_base  # noqa: PLW0603 (one setting per process, set once at start)
    _documentation_base = base_url.rstrip("/")


# Fields an answer names at most: more than any route has, fewer than a body of a thousand wrong items would make.
MOST_DETAILS = 200


@dataclass(frozen=True)
class ErrorDetail:
    """One field-level problem: which parameter and what is wrong with it."""

    field: str
    message: str


class ServiceError(Exception):
    """Base of every error a client may see. Subclasses fix `code` and `status`."""

    code: ClassVar[str] = "internal_application_error"
    status: ClassVar[int] = 500
    # Whether the error is unexpected and worth a log line with a stack trace.
    report: ClassVar[bool] = False
    # Seconds after which a retry may succeed (the answer's Retry-After), for the errors that say so.
    retry_after: int | None = None
    # What refused the request, where its code alone does not say (the refusals metric's reason).
    reason: str | None = None
    _by_code: ClassVar[dict[str, type[ServiceError]]] = {}

    def __init__(
        self,
        message: str,
        details: list[ErrorDetail] | None = None,
        *,
        returned_status_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = (details or [])[:MOST_DETAILS]
        self.returned_status_code = returned_status_code

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        ServiceError._by_code.setdefault(cls.code, cls)

    def to_payload(self) -> dict[str, Any]:
        """The JSON error body every refusal gets (docs/using.md, Errors)."""
        body: dict[str, Any] = {
            "is_successful": False,
            "error_code": self.code,
            "error_message": self.message,
            "error_details": [{"field": d.field, "message": d.message} for d in self.details],
            "documentation_url": f"{_documentation_base}/errors/{self.code}",
        }
        if self.returned_status_code is not None:
            body["returned_status_code"] = self.returned_status_code
        return body

    @classmethod
    def from_payload(cls, body: dict[str, Any]) -> ServiceError:
        """Rebuild an error sent across the queue by `to_payload`."""
        error_cls = cls._by_code.get(str(body.get("error_code")), InternalError)
        details = [ErrorDetail(d["field"], d["message"]) for d in body.get("error_details", [])]
        return error_cls(
            str(body.get("error_message", "")),
            details,
            returned_status_code=body.get("returned_status_code"),
        )


class InternalError(ServiceError):
    code = "internal_application_error"
    status = 500
    report = True

    def __init__(self, message: str = "Internal error; it is safe to retry the request.", *args: Any,
                 **kwargs: Any) -> None:
        super().__init__(message, *args, **kwargs)


class PageCrashed(InternalError):
    """The page's renderer crashed: the page's doing (most often it ran out of memory), not the service's."""

    report = False

    def __init__(self, what: str = "the page") -> None:
        super().__init__(
            f"The browser tab crashed while capturing {what}: the page ran out of memory or made Chromium's "
            "renderer fail. Retrying will most likely crash again; a page that needs more JavaScript memory "
            "than about 290 MB can be captured where the operator sets SCREENSHOT_CHROMIUM_LOW_MEMORY=false.")


class BrowserGone(InternalError):
    """Chromium itself stopped under a job (it crashed or was killed): the service's fault, not the target's.
    The worker runs the job once more on a new Chromium before it answers this."""

    def __init__(self) -> None:
        super().__init__("The browser rendering this capture stopped (it crashed or was killed), twice; nothing "
                         "was charged. It is safe to retry the request.")


class RequestNotValid(ServiceError):
    code = "request_not_valid"
    status = 400


class SelectorNotFound(ServiceError):
    code = "selector_not_found"
    status = 400


class InvalidCookieParameter(ServiceError):
    code = "invalid_cookie_parameter"
    status = 400


class InvalidHeaderParameter(ServiceError):
    code = "invalid_header_parameter"
    status = 400


class ResultingImageTooLarge(ServiceError):
    code = "resulting_image_too_large"
    status = 400


class NameNotResolved(ServiceError):
    code = "name_not_resolved"
    status = 400


class NetworkError(ServiceError):
    code = "network_error"
    status = 500


class HostReturnedError(ServiceError):
    code = "host_returned_error"
    status = 500


class CaptureTimeout(ServiceError):
    code = "timeout_error"
    status = 500


class ContentContainsString(ServiceError):
    code = "content_contains_specified_string"
    status = 500


class ContentMissingString(ServiceError):
    code = "content_missing_specified_string"
    status = 500


class MatchedFailedRequest(ServiceError):
    code = "matched_failed_request"
    status = 500


class ConsoleErrors(ServiceError):
    """fail_on_console_errors: the page logged an error or threw one it did not catch."""

    code = "console_errors"
    status = 500


class ResourceFailed(ServiceError):
    """fail_on_resource_status / fail_on_resource_load_failure: a subresource of the page failed."""

    code = "resource_failed"
    status = 500


class VisionResponseInvalid(ServiceError):
    """vision_response_schema: the provider answered outside the schema (not JSON, or JSON that does not follow it)."""

    code = "vision_response_invalid"
    status = 500


class ScriptTriggersRedirect(ServiceError):
    code = "script_triggers_redirect"
    status = 400


class StorageAccessDenied(ServiceError):
    code = "storage_access_denied"
    status = 400


class TemporaryUnavailable(ServiceError):
    code = "temporary_unavailable"
    status = 503
    retry_after = 5
