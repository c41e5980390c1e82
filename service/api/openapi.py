"""The OpenAPI document, typed from the one options model so generated clients work.

FastAPI describes what route signatures declare; the capture routes read their own parameters (query
arrays, JSON numbers kept as sent for signatures), so their parameters, bodies and answers come from here:
every `/take` and `/animate` parameter with its type, enum, default and range (GET and POST), the
access-key security schemes, every media type a capture answers with, and the error body of every
failure. Routes attach these with `openapi_extra=` / `responses=`; `document()` adds the shared
components and drops FastAPI's 422 answers, which this API never gives (request_not_valid is a 400).
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from render.contract.comparing import CompareRequest
from render.contract.formats import FORMATS, media_types
from render.contract.monitors import MonitorSpec
from render.contract.timings import STAGES
from service.api.error_reference import ENTRIES
from service.options_schema import options_schema

ERROR = {"$ref": "#/components/schemas/Error"}
SECURED: list[dict[str, list[str]]] = [{"AccessKeyHeader": []}, {"AccessKeyQuery": []}]
# The default format's type first: generators that read one media type per answer take the first.
_IMAGE_TYPES = media_types("image")
_VIDEO_TYPES = media_types("video")
_DOCUMENT_TYPES = media_types("document")
_BINARY = {"type": "string", "format": "binary"}


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter is absent rather than null: `anyOf [X, null]` becomes X."""
    options = schema.get("anyOf")
    if not options:
        return schema
    kept = [option for option in options if option.get("type") != "null"]
    if len(kept) != 1:
        return schema
    merged = {**{k: v for k, v in schema.items() if k != "anyOf"}, **kept[0]}
    if merged.get("default", 0) is None:
        del merged["default"]
    return merged


def query_parameters(kind: str) -> dict[str, Any]:
    """openapi_extra of a GET capture route: every parameter typed, arrays as repeated keys."""
    parameters = []
    for name, schema in options_schema(kind)["properties"].items():
        if name == "access_key":
            continue  # the AccessKeyQuery security scheme
        schema = _not_null(copy.deepcopy(schema))
        parameter = {"name": name, "in": "query", "required": False,
                     "description": schema.pop("description", ""), "schema": schema}
        if schema.get("type") == "array":
            parameter.update(style="form", explode=True)
        parameters.append(parameter)
    return {"parameters": parameters, "security": SECURED}


def json_body(schema: str) -> dict[str, Any]:
    """openapi_extra of a route whose body is the JSON object of component `schema`, sent with an access key."""
    return {"requestBody": {"required": True, "content": {
        "application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}}, "security": SECURED}


def request_body(kind: str) -> dict[str, Any]:
    """openapi_extra of a POST capture route: the parameters as a JSON object (the query may add more)."""
    return json_body("AnimateOptions" if kind == "animate" else "TakeOptions")


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    meaning = {400: "The request was refused: error_code and error_details say why and which field. A missing key "
                    "is access_key_required and a wrong or revoked one access_key_invalid, both 400 as the spec says "
                    "(this API answers no 401 or 403). Parameters valid one by one may still be refused together "
                    "(a rule across fields: exactly one of url, html and markdown; docs/using.md, Parameters).",
               404: "No such route or job (a key no route can match: control characters).", 405: "Method not allowed.",
               413: "The body is over SCREENSHOT_MAX_BODY_BYTES.",
               500: "The capture failed (timeout, network, the page's host) or an internal error.",
               503: "The queue store is unreachable or the queue is full: retry later."}
    answers: dict[int | str, dict[str, Any]] = {
        status: {"description": meaning[status], "content": {"application/json": {"schema": ERROR}}}
        for status in statuses}
    if 400 in answers:  # refused by the HTTP server itself, before the API reads the request
        answers[400]["description"] += (" A request line or header block over 64 KiB is refused by the HTTP server "
                                        "before the API reads it, in plain text: send long parameters in a POST body.")
        answers[400]["content"]["text/plain"] = {"schema": {"type": "string"}}
    return answers


def _headers() -> dict[str, Any]:
    text = {"schema": {"type": "string"}}
    return {"x-service-reference": {**text, "description": "The job's reference (GET /jobs/{reference})."},
            "x-service-trace-id": {**text, "description": "The request's trace id, as in the logs."}}


def capture_responses(kind: str) -> dict[int | str, dict[str, Any]]:
    """Every answer of a capture route: the bytes of each format, the JSON body, async, the errors."""
    binary = _VIDEO_TYPES if kind == "animate" else [*_IMAGE_TYPES, *_DOCUMENT_TYPES]
    content: dict[str, Any] = {media: {"schema": _BINARY} for media in binary}
    content["application/json"] = {"schema": {"$ref": "#/components/schemas/CaptureResult"}}
    return {
        200: {"description": "response_type=by_format: the output's bytes, typed by format; json: the JSON "
                             "body; empty: headers only, no body.", "content": content, "headers": _headers()},
        202: {"description": "async=true: accepted; the result goes to the webhook or GET /jobs/{reference}.",
              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Accepted"}}},
              "headers": _headers()},
        **_errors(400, 413, 500, 503),
    }


def json_responses(schema: str, *statuses: int, success: int = 200) -> dict[int | str, dict[str, Any]]:
    """An operation answering a JSON object (`schema`, a component) with `success`, or the error body."""
    return {success: {"description": "Created" if success == 201 else "OK", "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{schema}"}}}}, **_errors(*statuses)}


def bulk_responses() -> dict[int | str, dict[str, Any]]:
    """POST /bulk: the entries' answers as JSON, or with merge_pdf one PDF."""
    answers = json_responses("BulkAnswer", 400, 413, 500)
    answers[200]["content"][FORMATS["pdf"].media_type] = {"schema": _BINARY}
    answers[200]["description"] = "The entries' answers; with merge_pdf, one PDF of them all."
    return answers


def compare_responses() -> dict[int | str, dict[str, Any]]:
    """POST /compare: the change as JSON, or the diff image."""
    return {200: {"description": "response_type=json: the change and the three images' links; by_format: the "
                                 "diff image, the change in x-service-change-* headers.",
                  "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Comparison"}},
                              FORMATS["png"].media_type: {"schema": _BINARY}}},
            **_errors(400, 413, 500)}


def text_responses(media_type: str, *statuses: int) -> dict[int | str, dict[str, Any]]:
    """An operation answering a page or text (`media_type`), or the error body."""
    return {200: {"description": "OK", "content": {media_type: {"schema": {"type": "string"}}}},
            **_errors(*statuses)}


def health_responses() -> dict[int | str, dict[str, Any]]:
    """/healthz and /readyz: the state, 503 while not ready."""
    state = {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}
    return {200: {"description": "Up (and ready).", "content": state},
            503: {"description": "Not ready: Redis unreachable or no worker seen lately.", "content": state}}


def file_responses() -> dict[int | str, dict[str, Any]]:
    """A stored result through its signed link: whatever was stored."""
    content = {media: {"schema": _BINARY} for media in [*_IMAGE_TYPES, *_DOCUMENT_TYPES, *_VIDEO_TYPES]}
    content["application/json"] = {"schema": {}}
    return {200: {"description": "The stored bytes.", "content": content}, **_errors(400, 404)}


def _monitor(spec: dict[str, Any]) -> dict[str, Any]:
    """A monitor as answered: its spec's fields and what the service keeps of it, in one object (an allOf with the
    spec, which admits no other field, could match no answer)."""
    text = {"type": "string"}
    kept = {"id": text, "paused_reason": {"type": ["string", "null"]}, "failures_in_row": {"type": "integer"},
            "created": text, "updated": text, "next_run": {"type": ["string", "null"]},
            "last_run": {"anyOf": [{"$ref": "#/components/schemas/MonitorRun"}, {"type": "null"}]}}
    return {"type": "object", "title": "Monitor", "additionalProperties": False,
            "properties": {**spec["properties"], **kept}, "required": [*spec.get("required", []), *kept]}


def _components(bulk_max: int) -> dict[str, Any]:
    text, number = {"type": "string"}, {"type": "integer"}
    take = options_schema("take")
    credentials = ("access_key", "signature")
    monitor_spec = MonitorSpec.model_json_schema(ref_template="#/components/schemas/{model}")
    monitor_defs = monitor_spec.pop("$defs", {})
    monitor_spec["properties"]["request"] = {**monitor_spec["properties"]["request"],
                                             "$ref": "#/components/schemas/BulkEntry"}
    compare_request = CompareRequest.model_json_schema()
    for side in ("before", "after"):
        compare_request["properties"][side] = {**compare_request["properties"][side], "type": "object", "anyOf": [
            {"$ref": "#/components/schemas/BulkEntry"},
            {"type": "object", "required": ["reference"], "properties": {"reference": text},
             "additionalProperties": False}]}
    entry = {"$ref": "#/components/schemas/BulkEntry"}
    return {
        "BulkEntry": {**take, "title": "BulkEntry", "description": "/take parameters, without the credentials "
                      "(the bulk request's own are used).",
                      "properties": {k: v for k, v in take["properties"].items() if k not in credentials}},
        "TakeOptions": take,
        "AnimateOptions": options_schema("animate"),
        "Error": {"type": "object", "title": "Error", "required": ["is_successful", "error_code", "error_message"],
                  "properties": {
                      "is_successful": {"type": "boolean", "const": False},
                      "error_code": {"type": "string", "enum": sorted(ENTRIES)},
                      "error_message": text,
                      "error_details": {"type": "array", "items": {
                          "type": "object", "required": ["field", "message"],
                          "properties": {"field": text, "message": text}}},
                      "documentation_url": text,
                      "returned_status_code": number}},
        "CaptureResult": {
            "type": "object", "title": "CaptureResult", "required": ["is_successful"],
            "description": "response_type=json: where the output is, and the metadata asked for.",
            "additionalProperties": True,
            "properties": {"is_successful": {"type": "boolean", "const": True},
                           "screenshot_url": {"type": ["string", "null"]}, "cache_url": text,
                           "format": text, "size_bytes": number,
                           "store": {"type": "object", "properties": {"bucket": text, "key": text,
                                                                        "location": {"type": ["string", "null"]}}},
                           "slices": {"type": "array", "items": {"$ref": "#/components/schemas/Slice"}},
                           "metadata": {"type": "object", "additionalProperties": True,
                                        "description": "What metadata_* asked for (docs/using.md, What happened on "
                                                       "the page): console, timings, accessibility, ..."},
                           **{name: {"$ref": "#/components/schemas/StoredLink"}
                              for name in ("content", "accessibility", "certificate", "har", "archive")}}},
        "StoredLink": {"type": "object", "title": "StoredLink", "required": ["url", "expires"],
                       "description": "An artefact stored beside the result, through its signed, expiring link.",
                       "properties": {"url": text, "expires": text}},
        "PublicKey": {"type": "object", "title": "PublicKey",
                      "required": ["algorithm", "key_id", "public_key", "pem"],
                      "description": "The key certificates of certify=true are signed with.",
                      "properties": {"algorithm": {"type": "string", "const": "Ed25519"}, "key_id": text,
                                     "public_key": {"type": "string", "description": "Its 32 bytes, base64."},
                                     "pem": text}},
        "ArchivePublicKey": {
            "type": "object", "title": "ArchivePublicKey", "required": ["algorithm", "public_key"],
            "description": "The key the web archives of archive=true are signed with, as a WACZ's signedData holds it.",
            "properties": {"algorithm": {"type": "string", "const": "ECDSA P-384 SHA-256"},
                           "public_key": {"type": "string", "description": "Its SubjectPublicKeyInfo (DER), base64."}}},
        "Health": {"type": "object", "title": "Health", "required": ["status"], "properties": {
            "status": {"type": "string", "enum": ["ok", "unavailable"]}, "redis": {"type": "boolean"},
            "workers": number}},
        "Slice": {"type": "object", "title": "Slice", "properties": {
            "index": number, "offset_y": number, "width": number, "height": number, "url": text}},
        "Slices": {"type": "object", "title": "Slices", "required": ["slices"], "properties": {
            "slices": {"type": "array", "items": {"$ref": "#/components/schemas/Slice"}}}},
        "Accepted": {"type": "object", "title": "Accepted", "required": ["is_successful", "reference"],
                     "properties": {"is_successful": {"type": "boolean"}, "reference": text}},
        "Job": {"type": "object", "title": "Job", "required": ["is_successful", "reference", "status"],
                "properties": {
                    "is_successful": {"type": "boolean"}, "reference": text,
                    "status": {"type": "string", "enum": ["queued", "rendering", "done", "failed", "cancelled"]},
                    "stage": {"type": "string", "enum": list(STAGES), "description": "What a rendering async job "
                              "is doing (the stages of Server-Timing): context, navigation, waits, preparation, "
                              "capture, encode, metadata, store."},
                    "error_code": text, "error_message": text, "screenshot_url": {"type": ["string", "null"]},
                    "format": text, "size_bytes": number,
                    "webhook": {"type": "object", "properties": {"status": text, "attempts": number}}},
                "description": "A done job also answers what its synchronous JSON answer holds (Success): "
                               "screenshot_url, format, size_bytes, metadata, stored links."},
        "Cancellation": {
            "type": "object", "title": "Cancellation",
            "required": ["is_successful", "reference", "status", "cancelled", "message"],
            "description": "The job after DELETE: cancelled (never rendered, nothing charged), or why not.",
            "properties": {
                "is_successful": {"type": "boolean"}, "reference": text,
                "status": {"type": "string", "enum": ["queued", "rendering", "done", "failed", "cancelled"]},
                "cancelled": {"type": "boolean", "description": "This request stopped the job."},
                "charged": {"type": "boolean", "description": "Whether the job was charged (left out while it "
                                                              "is rendering: charged if it succeeds)."},
                "message": text}},
        "Usage": {"type": "object", "title": "Usage", "required": ["total", "available", "used", "concurrency"],
                  "properties": {
                      "total": number, "available": number, "used": number,
                      "concurrency": {"type": "object", "required": ["limit", "remaining", "reset"],
                                      "properties": {"limit": number, "remaining": number, "reset": number}}}},
        "BulkRequest": {
            "type": "object", "title": "BulkRequest", "required": ["requests"], "additionalProperties": False,
            "properties": {
                # null: the same as leaving the field out, as in every capture's body.
                "access_key": {"type": ["string", "null"], "writeOnly": True},
                "execute": {"type": ["boolean", "null"], "default": False,
                            "description": "Run the captures now and answer their results."},
                "optimize": {"type": ["boolean", "null"], "default": False,
                             "description": "With execute: load each distinct page once."},
                "merge_pdf": {"type": ["boolean", "null"], "default": False,
                              "description": "With execute, every request a PDF: answer one PDF of them all."},
                "options": {"anyOf": [entry, {"type": "null"}], "description": "Parameters every entry starts from."},
                "requests": {"type": "array", "minItems": 1, "maxItems": bulk_max, "items": entry,
                             "description": "One object of /take parameters per capture (SCREENSHOT_BULK_MAX_"
                                            "REQUESTS at most)."}}},
        "CompareRequest": compare_request,
        "MonitorSpec": monitor_spec,
        "MonitorChange": {**monitor_spec, "title": "MonitorChange", "required": [],
                          "description": "PATCH /v1/monitors/{id}: the fields to change; the others (a null "
                                         "request too) stay as they are.",
                          "properties": {**monitor_spec["properties"], "request": {
                              "anyOf": [monitor_spec["properties"]["request"], {"type": "null"}]}}},
        **monitor_defs,
        "Monitor": _monitor(monitor_spec),
        "Monitors": {"type": "object", "title": "Monitors", "properties": {
            "monitors": {"type": "array", "items": {"$ref": "#/components/schemas/Monitor"}}}},
        "MonitorRun": {"type": "object", "title": "MonitorRun", "description": "One run of a monitor.", "properties": {
            "reference": text, "due": text, "finished": text, "status": {"type": "string", "enum": ["done", "failed"]},
            "changed": {"type": ["boolean", "null"], "description": "null: nothing to compare with (the first run, "
                                                                    "or a failure)."},
            "change": {"anyOf": [{"$ref": "#/components/schemas/Change"}, {"type": "null"}]},
            "previous_reference": {"type": ["string", "null"]}, "error_code": text, "error_message": text,
            "screenshot": {"$ref": "#/components/schemas/StoredLink"},
            "diff": {"$ref": "#/components/schemas/StoredLink"}}},
        "MonitorRuns": {"type": "object", "title": "MonitorRuns", "properties": {
            "runs": {"type": "array", "items": {"$ref": "#/components/schemas/MonitorRun"}}}},
        "Deleted": {"type": "object", "title": "Deleted", "properties": {"is_successful": {"type": "boolean"},
                                                                          "id": text}},
        "Change": {"type": "object", "title": "Change", "description": "What changed from one shot to the next.",
                   "properties": {
                       "changed_share": {"type": "number", "description": "Share (0-1) of the newer shot's pixels "
                                                                          "that changed."},
                       "ssim": {"type": "number", "description": "Structural similarity, 1: the same picture."},
                       "boxes": {"type": "array", "items": {"type": "object", "properties": {
                           "x": number, "y": number, "width": number, "height": number}},
                           "description": "The changed regions, largest first (100 at most)."},
                       "inserted_rows": number, "removed_rows": number, "width": number, "height": number}},
        "Comparison": {"type": "object", "title": "Comparison", "required": ["is_successful", "changed", "change"],
                       "properties": {"is_successful": {"type": "boolean"}, "reference": text,
                                      "changed": {"type": "boolean"},
                                      "change": {"$ref": "#/components/schemas/Change"},
                                      **{name: {"$ref": "#/components/schemas/StoredLink"}
                                         for name in ("diff", "before", "after")}}},
        "BulkAnswer": {"type": "array", "title": "BulkAnswer", "items": {
            "type": "object", "required": ["url"], "properties": {
                "url": {"type": ["string", "null"], "description": "The entry as a /take URL (lazy)."},
                "response": {"type": "object", "required": ["is_successful", "status", "body"], "properties": {
                    "is_successful": {"type": "boolean"}, "status": number,
                    "body": {"type": "string", "contentEncoding": "base64",
                             "description": "What /take would have answered, base64."}}}}}},
    }


def document(app: FastAPI, bulk_max: int) -> dict[str, Any]:
    """The whole OpenAPI document of `app` (cached on it as FastAPI does)."""
    if app.openapi_schema:
        return app.openapi_schema
    spec = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    components = spec.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    schemas.update(_components(bulk_max))
    refused = " A missing key is refused 400 access_key_required, a wrong one 400 access_key_invalid."
    components["securitySchemes"] = {
        "AccessKeyHeader": {"type": "apiKey", "in": "header", "name": "X-Access-Key",
                            "description": "The organisation's access key." + refused},
        "AccessKeyQuery": {"type": "apiKey", "in": "query", "name": "access_key",
                           "description": "The organisation's access key, in the query (or a JSON body's access_key)."
                                          + refused}}
    for operations in spec["paths"].values():
        for operation in operations.values():
            operation.get("responses", {}).pop("422", None)
            operation.setdefault("security", [])
            for status, answer in operation.get("responses", {}).items():
                # FastAPI puts its default JSON first; the bytes of the default format lead instead (a
                # refusal's JSON error body stays first: generators read an answer's first media type).
                content = answer.get("content", {})
                if str(status).startswith("2") and len(content) > 1 and "application/json" in content:
                    content["application/json"] = content.pop("application/json")
    _link(spec)
    app.openapi_schema = spec
    return spec


def _pointer(path: str, method: str) -> str:
    return "#/paths/" + path.replace("~", "~0").replace("/", "~1") + "/" + method


# Where an answer's identifier leads (OpenAPI links: what generated clients and stateful testers follow): an
# accepted async capture to its job, a created monitor to its own operations. Named by method and target.
JOB = ("Job", "/v1/screenshot/jobs/{reference}", "reference", "$response.body#/reference")
LINKS: dict[tuple[str, str], list[tuple[str, str, str, str]]] = {
    ("/v1/screenshot/take", "202"): [JOB],
    ("/v1/screenshot/animate", "202"): [JOB],
    ("/v1/monitors", "201"): [("Monitor", "/v1/monitors/{monitor_id}", "monitor_id", "$response.body#/id"),
                              ("MonitorRuns", "/v1/monitors/{monitor_id}/runs", "monitor_id", "$response.body#/id")],
}


def _link(spec: dict[str, Any]) -> None:
    paths = spec["paths"]
    for (path, status), targets in LINKS.items():
        for operation in paths.get(path, {}).values():
            answer = operation.get("responses", {}).get(status)
            if answer is None:
                continue
            answer["links"] = {f"{method}{name}": {"operationRef": _pointer(target, method),
                                                   "parameters": {parameter: value}}
                               for name, target, parameter, value in targets for method in paths.get(target, {})}
