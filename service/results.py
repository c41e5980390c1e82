"""A finished capture as its receiver sees it: status, headers and body.

One presentation for every way a result leaves the service: the synchronous answer, a cache hit and
a webhook delivery carry exactly the same body and headers for the same `response_type`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import quote

import orjson

from render.contract.errors import ServiceError
from render.contract.options import TakeOptions
from render.contract.wire import JobResult
from service import metadata
from service.times import iso_time
from storage import Storage
from storage.local import file_signature, sign_file_url

# Signed manifest links (Links.slices_url) sign this prefix with the key, so no /files link signature is one.
SLICES_SIGNED = "slices:"


@dataclass(frozen=True)
class Links:
    """Time-limited URLs for stored objects: the backend's own (presigned, CDN) or signed for /files."""

    storage: Storage
    base_url: str
    secret: bytes
    ttl: int

    def url(self, key: str) -> tuple[str, float]:
        """The URL of `key` and the UNIX time it expires."""
        expires = int(time.time()) + self.ttl
        url = self.storage.client_url(key, self.ttl)
        if url is not None:
            return url, expires
        return sign_file_url(self.base_url, self.secret, key, expires), expires

    def slices_url(self, manifest_key: str) -> str:
        """The URL of a full_page_slices manifest: the API answers it with fresh links to each slice."""
        expires = int(time.time()) + self.ttl
        signature = file_signature(self.secret, SLICES_SIGNED + manifest_key, expires)
        return (f"{self.base_url.rstrip('/')}/v1/screenshot/slices/{quote(manifest_key)}?expires={expires}"
                f"&signature={signature}")

    def slices(self, slices: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The slices as the client sees them: each with a URL instead of its storage key."""
        return [{"index": piece["index"], "offset_y": piece["offset_y"], "width": piece["width"],
                 "height": piece["height"], "url": self.url(piece["key"])[0]} for piece in slices]


@dataclass(frozen=True)
class Presented:
    """What to send: status, headers and body bytes."""

    status: int
    headers: dict[str, str]
    body: bytes
    media_type: str | None


def success_headers(result: JobResult, reference: str, trace_id: str, options: TakeOptions) -> dict[str, str]:
    """The headers every successful capture carries."""
    headers = {
        "x-service-rendering-seconds": f"{result.rendering_seconds:.3f}",
        "x-service-size-bytes": str(result.size_bytes),
        "x-service-reference": reference,
        "x-service-trace-id": trace_id,
    }
    if options.external_identifier is not None:
        headers["x-service-external-identifier"] = options.external_identifier
    if options.request_gpu_rendering:
        headers["x-service-gpu-rendering"] = "software"  # no worker of this build has a GPU
    return headers


OWN_PREFIX = "x-service-"
HOSTED_PREFIX = "x-screenshotone-"


def with_hosted_names(headers: dict[str, str]) -> dict[str, str]:
    """The headers, each x-service-* one also under the hosted API's x-screenshotone-* name."""
    hosted = {HOSTED_PREFIX + name[len(OWN_PREFIX):]: value for name, value in headers.items()
              if name.lower().startswith(OWN_PREFIX)}
    return {**headers, **hosted}


def content_disposition(name: str) -> str:
    """`attachment` with the name as plain ASCII and, when it is not, as RFC 6266's UTF-8 `filename*`."""
    plain = "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "_" for c in name)
    value = f'attachment; filename="{plain}"'
    if plain != name:
        value += f"; filename*=UTF-8''{quote(name, safe='')}"
    return value


def present_success(options: TakeOptions, result: JobResult, reference: str, trace_id: str, links: Links,
                    cache_url: str | None = None) -> Presented:
    """by_format: the bytes; json: the JSON body (docs/using.md, What comes back); empty: headers only. Metadata (and
    the cache URL) go with all three. `result.body` must hold the bytes for by_format."""
    artefacts = dict(result.artefacts)
    if result.content_key and "content" not in artefacts:  # a result cached by an earlier version
        artefacts["content"] = result.content_key
    links_to = {name: links.url(key) for name, key in artefacts.items()}
    fields, metadata_headers = metadata.present(options, result, links_to)
    headers = {**success_headers(result, reference, trace_id, options), **metadata_headers}
    if cache_url is not None:
        headers["x-service-cache-url"] = cache_url
    stored = result.stored_copy
    if stored is not None:  # store=true: where the caller's bucket has it
        headers["x-service-store-bucket"] = stored.bucket
        headers["x-service-store-key"] = stored.key
        if stored.location is not None:
            headers["x-service-store-location"] = stored.location
        fields["store"] = asdict(stored)
    if result.slices_manifest is not None:
        headers["x-service-full-page-slices-url"] = links.slices_url(result.slices_manifest)
        fields["slices"] = links.slices([asdict(piece) for piece in result.slices])
    if options.response_type == "by_format":
        if options.attachment_name is not None:
            headers["content-disposition"] = content_disposition(options.attachment_name)
        return Presented(200, headers, result.body, result.content_type)
    if options.response_type == "empty":  # typed as the output it stands for (a client may check what was made)
        return Presented(200, headers, b"", result.content_type)
    body: dict[str, Any] = {
        "is_successful": True,
        "screenshot_url": links.url(result.storage_key)[0] if result.storage_key else None,
    }
    if cache_url is not None:
        body["cache_url"] = cache_url
    body.update({"format": options.format, "size_bytes": result.size_bytes, **fields})
    return Presented(200, headers, orjson.dumps(body), "application/json")


def present_error(error: ServiceError, reference: str, trace_id: str, options: TakeOptions | None) -> Presented:
    """The JSON error body with the error headers (and the caller's identifier)."""
    headers = {"x-service-error-code": error.code, "x-service-error-message": _ascii(error.message),
               "x-service-reference": reference, "x-service-trace-id": trace_id}
    if options is not None and options.external_identifier is not None:
        headers["x-service-external-identifier"] = options.external_identifier
    return Presented(error.status, headers, orjson.dumps(error.to_payload()), "application/json")


def _ascii(text: str) -> str:
    """A header-safe single line: printable ASCII kept, anything else percent-encoded as UTF-8."""
    return "".join(c if 32 <= ord(c) < 127 else quote(c) for c in " ".join(text.split()))[:1000]


def present_monitor_run(monitor_id: str, run: dict[str, Any], reference: str, trace_id: str, links: Links
                        ) -> Presented:
    """A monitor's run as its webhook receives it."""
    body = {"is_successful": run["status"] == "done", "monitor_id": monitor_id, **present_run(run, links)}
    headers = {"x-service-reference": reference, "x-service-trace-id": trace_id, "x-service-monitor-id": monitor_id}
    return Presented(200, headers, orjson.dumps(body), "application/json")


def present_run(run: dict[str, Any], links: Links) -> dict[str, Any]:
    """A run as the API and webhooks show it: its keys become fresh links."""
    shown = {name: value for name, value in run.items() if name not in ("storage_key", "diff_key")}
    shown["due"] = iso_time(run["due"])
    shown["finished"] = iso_time(run["finished"])
    for name, key in (("screenshot", run.get("storage_key")), ("diff", run.get("diff_key"))):
        if key:
            url, expires = links.url(key)
            shown[name] = {"url": url, "expires": iso_time(expires)}
    return shown
