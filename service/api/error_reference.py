"""The error reference this server serves (`GET /errors`, `GET /errors/{code}`): what each error code
means and what to do about it. Every error body's `documentation_url` points at its code's entry here,
so a client (the hosted API's SDKs show it) lands on this server's own words, not another service's."""

from __future__ import annotations

import html
from dataclasses import dataclass

from render.contract.errors import ServiceError


@dataclass(frozen=True)
class Entry:
    meaning: str
    next_step: str


ENTRIES: dict[str, Entry] = {
    "access_key_required": Entry("The request carried no access key.",
                                 "Send it as the X-Access-Key header, the access_key query parameter or the "
                                 "access_key body field."),
    "access_key_invalid": Entry("The access key is unknown or revoked.",
                                "Check the key; the operator lists keys with `screenshot-service keys list`."),
    "signature_is_required": Entry("The organisation requires signed requests and this one has no signature.",
                                   "Sign the query with the organisation's signing key (docs/using.md, Signed "
                                   "requests); `screenshot-service keys show` prints the key."),
    "signature_is_not_valid": Entry("The signature does not match the request.",
                                    "Sign the exact query string sent, without `signature`, with the signing "
                                    "key (not the access key)."),
    "screenshots_limit_reached": Entry("The organisation's monthly quota is used up.",
                                       "Wait for the next month (UTC) or ask the operator for a larger quota; "
                                       "GET /v1/screenshot/usage shows what is left."),
    "concurrency_limit_reached": Entry("The organisation already runs as many captures as it may at once.",
                                       "Retry when one finishes; GET /v1/screenshot/usage says when a slot "
                                       "frees."),
    "request_not_valid": Entry("A parameter is missing, unknown or out of range; error_details names it.",
                               "Fix the parameter error_details names; docs/parameters.md lists every one."),
    "request_body_too_large": Entry("The request body is larger than the server accepts.",
                                    "Send less (the limit is the operator's SCREENSHOT_MAX_BODY_BYTES)."),
    "selector_not_found": Entry("`selector` (or `click`, `hover`, `wait_for_selector`) matched nothing.",
                                "Check the selector against the page, or set the matching error_on_* "
                                "parameter to false."),
    "invalid_cookie_parameter": Entry("A `cookies` entry is not a valid Set-Cookie string.",
                                      "Send each cookie as `name=value; Domain=...; Path=...`."),
    "invalid_header_parameter": Entry("A `headers` entry is not a valid `Name: value` header.",
                                      "Send each header as `Name: value`, without line breaks."),
    "resulting_image_too_large": Entry("The output would exceed the size limits.",
                                       "Capture less: a smaller full_page_max_height, viewport or "
                                       "device_scale_factor."),
    "name_not_resolved": Entry("The target's host name does not resolve.", "Check the URL's host."),
    "network_error": Entry("The target could not be reached, or the network policy refused its address.",
                           "Check that the target is up and public; private addresses need the operator's "
                           "SCREENSHOT_ALLOWED_NETWORKS."),
    "host_returned_error": Entry("The target answered with a non-2xx status (returned_status_code).",
                                 "Fix the target, or set ignore_host_errors=true to capture the error page."),
    "timeout_error": Entry("The capture did not finish within `timeout` (or the page within "
                           "navigation_timeout).",
                           "Raise timeout, lower delay, or wait for less (wait_until=load)."),
    "content_contains_specified_string": Entry("The page contains a string of fail_if_content_contains.",
                                               "Nothing to fix here: the condition you set was met."),
    "content_missing_specified_string": Entry("The page contains none of the strings of "
                                              "fail_if_content_missing.",
                                              "Nothing to fix here: the condition you set was met."),
    "matched_failed_request": Entry("A request matching fail_if_request_failed failed.",
                                    "Nothing to fix here: the condition you set was met."),
    "console_errors": Entry("With fail_on_console_errors: the page called console.error or threw an exception "
                            "it did not catch; the message names the first.",
                            "Fix the page's script, or leave fail_on_console_errors out (metadata_console lists "
                            "the messages without failing)."),
    "vision_response_invalid": Entry("With vision_response_schema: the vision provider's answer is not JSON, or "
                                     "is JSON that does not follow the schema; the message says where.",
                                     "Retry (models vary), simplify the schema or the prompt, or check that the "
                                     "provider and model support structured output (SCREENSHOT_VISION_MODEL)."),
    "resource_failed": Entry("With fail_on_resource_status or fail_on_resource_load_failure: a subresource of "
                             "the page (an image, a script, a style sheet, a frame, a fetch) answered one of the "
                             "given statuses or did not load; the message names the first.",
                             "Nothing to fix here if you meant to catch it: the condition you set was met. "
                             "Requests the page cancels and the ones your blocking options refuse do not count."),
    "script_triggers_redirect": Entry("`scripts` navigated the page away.",
                                      "Set scripts_wait_until to the event the navigation ends with."),
    "storage_access_denied": Entry("The result could not be written to storage (the service's, or the "
                                   "bucket named by store=true).",
                                   "For store=true check the storage_* parameters and the bucket's "
                                   "permissions; otherwise tell the operator."),
    "internal_application_error": Entry("Something failed inside the service.",
                                        "Retry; if it persists, give the operator the x-service-trace-id."),
    "temporary_unavailable": Entry("The service is overloaded or a part of it is unreachable.",
                                   "Retry shortly, with backoff."),
}


def codes() -> list[str]:
    """Every error code a client can receive."""
    return sorted(ServiceError._by_code)  # noqa: SLF001 (the registry of codes)


def page(code: str | None = None) -> str:
    """The reference as an HTML page: one code, or all of them."""
    chosen = [code] if code is not None else codes()
    rows = []
    for name in chosen:
        entry = ENTRIES[name]
        status = ServiceError._by_code[name].status  # noqa: SLF001
        rows.append(f'<section id="{name}"><h2><code>{name}</code> (HTTP {status})</h2>'
                    f"<p>{html.escape(entry.meaning)}</p><p><b>What to do:</b> {html.escape(entry.next_step)}</p>"
                    "</section>")
    title = f"Error {code}" if code else "Errors"
    return (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{title}</title></head><body>"
            f'<h1>{title}</h1><p>No failed capture is charged against the quota.</p>{"".join(rows)}'
            '<p><a href="/errors">All error codes</a></p></body></html>')
