"""`POST /bulk`: several captures in one request, as lazy /take URLs or executed at once.

Each request is `options` overridden by its own entry, validated on its own: a bad entry gets its
error in its place and the others go on. Lazy entries are /take URLs carrying the access key (and
a signature when the organisation has a signing key), charged only when fetched. Eager entries run
concurrently within the organisation's concurrency; `optimize` loads each distinct page once.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
from collections.abc import Awaitable
from typing import Any
from urllib.parse import urlencode

import anyio
import orjson
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from render.contract.errors import ErrorDetail, RequestNotValid, ServiceError
from render.contract.formats import FORMATS
from render.contract.options import TakeOptions
from service import signatures
from service.api import openapi
from service.api.auth import body_caller
from service.api.capture_path import entry_options, new_reference, run_capture, run_page_once
from service.api.context import AppContext
from service.errors import within
from service.organisations import Organisation
from service.results import Presented, present_error, present_success

router = APIRouter(prefix="/v1/screenshot", tags=["capture"])


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def lazy_url(base_url: str, params: dict[str, Any], org: Organisation, access_key: str) -> str:
    """A /take URL for these parameters; signed (the "as sent" form) when the organisation can sign."""
    pairs: list[tuple[str, str]] = [("access_key", access_key)]
    for name, value in params.items():
        if value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            pairs.append((name, _query_value(item)))
    query = urlencode(pairs)
    if org.signing_key:
        query += f"&signature={signatures.sign(query, org.signing_key)}"
    return f"{base_url}/v1/screenshot/take?{query}"


def _entry_response(presented: Presented) -> dict[str, Any]:
    return {"is_successful": presented.status < 300, "status": presented.status,
            "body": base64.b64encode(presented.body).decode()}


@router.post("/bulk", openapi_extra=openapi.json_body("BulkRequest"),
             responses=openapi.bulk_responses(),
             summary="Several screenshots in one request (lazy URLs, or executed at once)")
async def bulk(request: Request) -> Response:
    context: AppContext = request.app.state.context
    org, body, access_key = await body_caller(request, "BulkRequest", whole=True)
    # The body is of the BulkRequest schema's types, ranges and fields by now (service/api/body_schema.py).
    execute, optimize, merge = (body.get(name) is True for name in ("execute", "optimize", "merge_pdf"))
    for name, given in (("optimize", optimize), ("merge_pdf", merge)):
        if given and not execute:
            raise RequestNotValid(f"{name} requires execute=true.", [ErrorDetail(name, "requires execute=true")])
    defaults = body.get("options") or {}
    merged = [{**defaults, **{k: v for k, v in entry.items() if k not in ("access_key", "signature")}}
              for entry in body["requests"]]
    trace_id = request.state.trace_id
    entries = [_validated(params_, execute) for params_ in merged]
    if merge:
        merged = [{**params_, "response_type": "by_format"} for params_ in merged]
        entries = [_validated(params_, execute) for params_ in merged]
        first_error(entries, pdf=True)
    if not execute:
        return JSONResponse([
            {"url": lazy_url(context.settings.service.base_url, params_, org, access_key)} if error is None
            else {"url": None, "response": _entry_response(present_error(error, "", trace_id, None))}
            for params_, (_, error) in zip(merged, entries, strict=True)])
    limit_parallel = asyncio.Semaphore(max(1, org.concurrency))

    async def run_one(params_: dict[str, Any], options: TakeOptions | None, error: ServiceError | None
                      ) -> dict[str, Any]:
        url = lazy_url(context.settings.service.base_url, params_, org, access_key)
        if options is None:
            assert error is not None
            return {"url": url, "response": _entry_response(present_error(error, "", trace_id, None))}
        reference = new_reference()
        async with limit_parallel:
            try:
                result = await run_capture(context, org, options, reference, trace_id,
                                           store=options.response_type == "json", interactive=False)
            except ServiceError as failed:
                return {"url": url, "response": _entry_response(present_error(failed, reference, trace_id, options))}
        return {"url": url, "response": _entry_response(
            present_success(options, result, reference, trace_id, context.links))}

    groups = page_groups(entries) if optimize else []
    grouped = {index for group in groups for index in group}
    tasks: dict[int, Awaitable[dict[str, Any]]] = {
        index: run_one(params_, ok, error)
        for index, (params_, (ok, error)) in enumerate(zip(merged, entries, strict=True)) if index not in grouped}
    answers: dict[int, dict[str, Any]] = {}

    async def run_group(group: list[int]) -> None:
        options = [entries[index][0] for index in group]
        outcomes = await run_page_once(context, org, [o for o in options if o is not None], trace_id)
        if outcomes is None:  # not enough concurrency for the whole group: one by one
            for index in group:
                answers[index] = await run_one(merged[index], entries[index][0], None)
            return
        for index, (reference, outcome) in zip(group, outcomes, strict=True):
            url = lazy_url(context.settings.service.base_url, merged[index], org, access_key)
            entry_options = entries[index][0]
            assert entry_options is not None
            presented = (present_error(outcome, reference, trace_id, entry_options) if isinstance(outcome, ServiceError)
                         else present_success(entry_options, outcome, reference, trace_id, context.links))
            answers[index] = {"url": url, "response": _entry_response(presented)}

    async def run_single(index: int, task: Awaitable[dict[str, Any]]) -> None:
        answers[index] = await task

    await asyncio.gather(*(run_group(group) for group in groups),
                         *(run_single(index, task) for index, task in tasks.items()))
    results = [answers[index] for index in range(len(merged))]
    if merge:
        return await merged_pdf(results)
    return Response(orjson.dumps(results), media_type="application/json")


def in_entry(error: ServiceError, index: int) -> ServiceError:
    """`error` of entry `index`, its message and fields naming the entry (`requests.2.format`)."""
    return within(error, f"requests[{index}]", f"requests.{index}")


def first_error(entries: list[tuple[TakeOptions | None, ServiceError | None]], *, pdf: bool = False) -> None:
    """merge_pdf: the first entry that is refused, or (with `pdf`) that is not a PDF, fails the whole request."""
    for index, (options, error) in enumerate(entries):
        if error is None and pdf and options is not None and options.format != "pdf":
            error = RequestNotValid("merge_pdf merges PDFs: every request needs format=pdf.",
                                    [ErrorDetail("format", "must be pdf")])
        if error is None and pdf and options is not None:
            locked = [name for name in ("pdf_user_password", "pdf_owner_password", "pdf_permissions")
                      if getattr(options, name) is not None]
            if locked:  # an encrypted PDF cannot be opened to be merged: refused before anything is captured
                error = RequestNotValid(f"merge_pdf cannot merge an encrypted PDF: leave out {', '.join(locked)}.",
                                        [ErrorDetail(name, "not with merge_pdf") for name in locked])
        if error is not None:
            raise in_entry(error, index)


async def merged_pdf(results: list[dict[str, Any]]) -> Response:
    """The entries' PDFs as one, in request order; the first failed entry's error (charged entries stay charged)."""
    bodies: list[bytes] = []
    for index, entry in enumerate(results):
        answer = entry["response"]
        body = base64.b64decode(answer["body"])
        if not answer["is_successful"]:
            raise in_entry(ServiceError.from_payload(orjson.loads(body)), index)
        bodies.append(body)
    merged, pages = await anyio.to_thread.run_sync(merge_pdfs, bodies)
    return Response(merged, media_type=FORMATS["pdf"].media_type, headers={"x-service-pages": str(pages),
                                                                     "x-service-documents": str(len(bodies))})


def merge_pdfs(documents: list[bytes]) -> tuple[bytes, int]:
    """One PDF of `documents`' pages, in order (pikepdf; imported on first use), and its page count."""
    import pikepdf

    with contextlib.ExitStack() as stack, pikepdf.new() as merged:
        for data in documents:  # each kept open until the merged file is written: its pages are copied then
            merged.pages.extend(stack.enter_context(pikepdf.open(io.BytesIO(data))).pages)
        out = io.BytesIO()
        merged.save(out)
        return out.getvalue(), len(merged.pages)


# What may differ between requests that share one page load (bulk `optimize`).
OUTPUT_FIELDS = frozenset({
    "format", "response_type", "image_quality", "image_width", "image_height", "omit_background",
    "selector", "selector_algorithm", "error_on_selector_not_found", "clip_x", "clip_y", "clip_width",
    "clip_height", "metadata_image_size", "archive",
})


def page_groups(entries: list[tuple[TakeOptions | None, ServiceError | None]]) -> list[list[int]]:
    """Indexes of valid entries that load the same page, in groups of two or more. Entries asking for
    vision or an upload to their own bucket run alone (their keys are sealed for their own job)."""
    groups: dict[bytes, list[int]] = {}
    for index, (options, _) in enumerate(entries):
        if options is None or options.vision_provider_api_key is not None or options.store:
            continue
        page = {k: v for k, v in options.to_payload().items() if k not in OUTPUT_FIELDS}
        page["recorded"] = options.recorded  # a web archive's traffic is recorded as the page loads
        groups.setdefault(orjson.dumps(page, option=orjson.OPT_SORT_KEYS), []).append(index)
    return [group for group in groups.values() if len(group) > 1]


def _validated(params: dict[str, Any], execute: bool) -> tuple[TakeOptions | None, ServiceError | None]:
    """The entry's options, or the error /take would have answered. Executed entries are answered in
    the bulk response itself: async, webhooks and the cache belong to lazy entries (plain /take URLs)."""
    try:
        return entry_options(params, "with execute=true; use lazy entries" if execute else None), None
    except ServiceError as error:
        return None, error


