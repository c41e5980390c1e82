"""`POST /bulk`: several captures in one request, as lazy /take URLs or executed at once.

Each request is `options` overridden by its own entry, validated on its own: a bad entry gets its
error in its place and the others go on. Lazy entries are /take URLs carrying the access key (and
a signature when the organisation has a signing key), charged only when fetched. Eager entries run
concurrently within the organisation's concurrency; `optimize` loads each distinct page once.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
from typing import Any
from urllib.parse import urlencode

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from render import request_params
from render.errors import ErrorDetail, RequestNotValid, ServiceError
from render.options import TakeOptions, parse_take_options
from service.auth import organisation_of
from service.context import AppContext
from service.errors import SignatureNotValid
from service.organisations import Organisation
from service.params import collect, parse_body
from service.results import Presented, present_error, present_success
from service.routes.capture import new_reference, run_capture

router = APIRouter(prefix="/v1/screenshot", tags=["capture"])
BULK_FIELDS = ("access_key", "execute", "optimize", "options", "requests", "signature")


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    raise RequestNotValid(f"{name} must be a boolean.", [ErrorDetail(name, "must be true or false")])


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
        signature = hmac.new(org.signing_key.encode(), query.encode(), hashlib.sha256).hexdigest()
        query += f"&signature={signature}"
    return f"{base_url}/v1/screenshot/take?{query}"


def _entry_response(presented: Presented) -> dict[str, Any]:
    return {"is_successful": presented.status < 300, "status": presented.status,
            "body": base64.b64encode(presented.body).decode()}


def _check_signature(org: Organisation, raw_body: bytes, signature: str | None) -> None:
    """Bulk bodies are nested JSON: a signature covers the raw body (hex HMAC-SHA256, like webhooks)."""
    if signature is None:
        if org.require_signature:
            from service.errors import SignatureRequired

            raise SignatureRequired("This organisation accepts only signed requests: add ?signature= with the "
                                    "hex HMAC-SHA256 of the raw JSON body, keyed with your signing key.")
        return
    expected = hmac.new((org.signing_key or "").encode(), raw_body, hashlib.sha256).hexdigest()
    if not org.signing_key or not hmac.compare_digest(signature, expected):
        raise SignatureNotValid("The signature does not match the body: sign the raw JSON body with your "
                                "signing key (hex HMAC-SHA256).")


@router.post("/bulk", summary="Several screenshots in one request (lazy URLs, or executed at once)")
async def bulk(request: Request) -> Response:
    context: AppContext = request.app.state.context
    raw_body = await request.body()
    body = parse_body(raw_body)
    params = collect(method="POST", raw_query=request.url.query, body={"access_key": body.get("access_key")},
                     header_key=request.headers.get("x-access-key"), array_params=frozenset())
    org = await organisation_of(params.access_key, context.organisations)
    _check_signature(org, raw_body, request.query_params.get("signature") or _str(body.get("signature")))
    unknown = sorted(set(body) - set(BULK_FIELDS))
    if unknown:
        raise RequestNotValid(f"Unknown bulk fields: {', '.join(unknown)}.",
                              [ErrorDetail(name, "unknown bulk field") for name in unknown])
    execute, optimize = _flag(body, "execute"), _flag(body, "optimize")
    if optimize and not execute:
        raise RequestNotValid("optimize requires execute=true.", [ErrorDetail("optimize", "requires execute=true")])
    if optimize:
        raise RequestNotValid("optimize is not built yet; send execute=true without it.",
                              [ErrorDetail("optimize", "not built yet")])
    defaults = body.get("options")
    defaults = {} if defaults is None else defaults
    requests = body.get("requests")
    if not isinstance(defaults, dict):
        raise RequestNotValid("options must be an object of /take parameters.",
                              [ErrorDetail("options", "must be an object")])
    limit = context.settings.service.bulk_max_requests
    if not isinstance(requests, list) or not requests or len(requests) > limit:
        raise RequestNotValid(f"requests must be an array of 1 to {limit} objects (setting "
                              "SCREENSHOT_BULK_MAX_REQUESTS).", [ErrorDetail("requests", f"1 to {limit} objects")])
    merged: list[dict[str, Any]] = []
    for index, entry in enumerate(requests):
        if not isinstance(entry, dict):
            raise RequestNotValid(f"requests[{index}] must be an object.",
                                  [ErrorDetail(f"requests.{index}", "must be an object")])
        merged.append({**defaults, **{k: v for k, v in entry.items() if k not in ("access_key", "signature")}})
    trace_id = request.state.trace_id
    entries = [_validated(params_, execute) for params_ in merged]
    if not execute:
        access_key = params.access_key or ""
        return JSONResponse([
            {"url": lazy_url(context.settings.service.base_url, params_, org, access_key)} if error is None
            else {"url": None, "response": _entry_response(present_error(error, "", trace_id, None))}
            for params_, (_, error) in zip(merged, entries, strict=True)])
    limit_parallel = asyncio.Semaphore(max(1, org.concurrency))

    async def run_one(params_: dict[str, Any], options: TakeOptions | None, error: ServiceError | None
                      ) -> dict[str, Any]:
        access_key = params.access_key or ""
        url = lazy_url(context.settings.service.base_url, params_, org, access_key)
        if options is None:
            assert error is not None
            return {"url": url, "response": _entry_response(present_error(error, "", trace_id, None))}
        reference = new_reference()
        async with limit_parallel:
            try:
                result = await run_capture(context, org, options, reference, trace_id,
                                           store=options.response_type == "json")
            except ServiceError as failed:
                return {"url": url, "response": _entry_response(present_error(failed, reference, trace_id, options))}
        return {"url": url, "response": _entry_response(
            present_success(options, result, reference, trace_id, context.links))}

    results = await asyncio.gather(*(run_one(p, ok, error) for p, (ok, error) in zip(merged, entries, strict=True)))
    return Response(orjson.dumps(results), media_type="application/json")


def _validated(params: dict[str, Any], execute: bool) -> tuple[TakeOptions | None, ServiceError | None]:
    """The entry's options, or the error /take would have answered. Executed entries are answered in
    the bulk response itself: async, webhooks and the cache belong to lazy entries (plain /take URLs)."""
    try:
        options = parse_take_options({k: _as_param(v) for k, v in params.items()})
        request_params.check(options)
        for name, alias in (("async_", "async"), ("webhook_url", "webhook_url"), ("cache", "cache")):
            if execute and getattr(options, name):
                raise RequestNotValid(f"{alias} is not available with execute=true; use lazy entries.",
                                      [ErrorDetail(alias, "not available with execute=true")])
        return options, None
    except ServiceError as error:
        return None, error


def _as_param(value: Any) -> Any:
    """JSON values as /take's JSON body carries them (numbers as text, like parse_body's)."""
    if isinstance(value, bool) or isinstance(value, list) or value is None:
        return value
    return str(value) if isinstance(value, int | float) else value


def _str(value: Any) -> str | None:
    return None if value is None else str(value)
