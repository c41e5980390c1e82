"""Who is asking: the access key, and the signature when one is given or required."""

from __future__ import annotations

from contextvars import ContextVar

from service import signatures
from service.errors import AccessKeyInvalid, AccessKeyRequired, SignatureNotValid, SignatureRequired
from service.organisations import Organisation, OrganisationStore
from service.params import RawParams

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
            "signature, sorted by name, as the README describes.")
    return org
