"""Who is asking: the access key, and the signature when one is given or required."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from fastapi import Request

from service import signatures
from service.api.body_schema import check as body_schema_check
from service.errors import AccessKeyInvalid, AccessKeyRequired, SignatureNotValid, SignatureRequired
from service.organisations import Organisation, OrganisationStore
from service.params import RawParams, collect, parse_body

# What the access log says of the request being served: its organisation, once known (the API's
# TraceMiddleware sets a fresh dict per request; code that authenticates fills it in).
request_facts: ContextVar[dict[str, str] | None] = ContextVar("request_facts", default=None)


async def organisation_of(access_key: str | None, store: OrganisationStore) -> Organisation:
    """The organisation owning an access key, or the key's error."""
    if not access_key:
        raise AccessKeyRequired(
            "An access key is required: send it in the X-Access-Key header, the access_key query "
            "parameter or the access_key body field.")
    org = await store.by_access_key(access_key)
    if org is None:
        raise AccessKeyInvalid("The access key is invalid or has been revoked.")
    facts = request_facts.get()
    if facts is not None:
        facts["organisation"] = org.id
    return org


async def authenticate(params: RawParams, store: OrganisationStore) -> Organisation:
    """The organisation of the request's access key, after checking its signature rules."""
    org = await organisation_of(params.access_key, store)
    if params.signature is None:
        if org.require_signature:
            raise SignatureRequired(
                "This organisation accepts only signed requests: add a signature parameter "
                "(hex HMAC-SHA256 of the canonical parameters with your signing key).")
        return org
    valid = org.signing_key is not None and signatures.is_valid(
        params.signature, org.signing_key, pairs=params.pairs, raw_query=params.raw_query,
        method=params.method)
    if not valid:
        raise SignatureNotValid(
            "The signature does not match the request's parameters; sign every parameter except "
            "signature, sorted by name, as docs/using.md describes.")
    return org


@dataclass(frozen=True)
class Caller:
    """An authenticated request: its parameters and the organisation it acts for."""

    params: RawParams
    organisation: Organisation


def caller(arrays: frozenset[str] = frozenset(), body_schema: str | None = None
           ) -> Callable[[Request], Awaitable[Caller]]:
    """A FastAPI dependency: the request's parameters (query string, and a POST's JSON body, of the OpenAPI
    component `body_schema`'s types; `arrays` are the parameters that take several values) and its
    organisation, after the access key and signature rules."""

    async def dependency(request: Request) -> Caller:
        raw = await request.body() if request.method == "POST" else b""
        body = parse_body(raw)
        if body and body_schema is not None:
            body_schema_check(request.app.openapi(), body_schema, raw)
        params = collect(method=request.method, raw_query=request.url.query, body=body,
                         header_key=request.headers.get("x-access-key"), array_params=arrays)
        return Caller(params, await authenticate(params, request.app.state.context.organisations))

    return dependency


async def body_caller(request: Request, body_schema: str, *, whole: bool = False
                      ) -> tuple[Organisation, dict[str, Any], str]:
    """A request whose parameters are nested JSON (bulk, compare, monitors): its organisation, its body (of the
    OpenAPI component `body_schema`'s types, or with `whole` all its rules) and its access key (the X-Access-Key
    header, the query or the body's `access_key`). Such a body is signed whole: `?signature=` is the hex
    HMAC-SHA256 of the raw body (like webhooks), in the query only, since a signature inside the body could
    not cover it."""
    raw_body = await request.body()
    body = parse_body(raw_body)
    body_schema_check(request.app.openapi(), body_schema, raw_body, whole=whole)
    params = collect(method="POST", raw_query=request.url.query, body={"access_key": body.get("access_key")},
                     header_key=request.headers.get("x-access-key"), array_params=frozenset())
    org = await organisation_of(params.access_key, request.app.state.context.organisations)
    signature = request.query_params.get("signature")
    if signature is None:
        if org.require_signature:
            raise SignatureRequired("This organisation accepts only signed requests: add ?signature= with the "
                                    "hex HMAC-SHA256 of the raw JSON body, keyed with your signing key.")
    else:
        if not org.signing_key or not signatures.matches(signature, raw_body, org.signing_key):
            raise SignatureNotValid("The signature does not match the body: sign the raw JSON body with your "
                                    "signing key (hex HMAC-SHA256).")
    return org, body, params.access_key or ""
