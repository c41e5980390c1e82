"""The caller's account: `/usage` (its quota and concurrency), and the public keys its certified captures and web
archives are signed with."""

from __future__ import annotations

from typing import Annotated

import anyio
from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from render.contract.certificates import public_key_document
from render.queue.archive_key import archive_key, public_key
from render.queue.certify_key import certify_key
from service.api import openapi
from service.api.auth import Caller, caller
from service.api.context import AppContext

router = APIRouter(prefix="/v1/screenshot", tags=["account"])


@router.get("/usage", openapi_extra={"security": openapi.SECURED},
            responses=openapi.json_responses("Usage", 400),
            summary="Quota and concurrency of the caller's organisation")
async def usage(request: Request, who: Annotated[Caller, Depends(caller())]) -> Response:
    context: AppContext = request.app.state.context
    record = await context.quota.usage(who.organisation)
    return JSONResponse(record.to_json())


@router.get("/certify/public-key", responses=openapi.json_responses("PublicKey"),
            summary="The Ed25519 public key certify=true signs with (no key needed to read it)")
async def certify_public_key(request: Request) -> Response:
    context: AppContext = request.app.state.context
    key = await anyio.to_thread.run_sync(
        certify_key, context.settings.render.certify_key_file, context.dispatcher.sync_redis)
    return JSONResponse(public_key_document(key))


@router.get("/archive/public-key", responses=openapi.json_responses("ArchivePublicKey"),
            summary="The ECDSA P-384 public key archive=true's WACZ files are signed with (no key needed to read it)")
async def archive_public_key(request: Request) -> Response:
    context: AppContext = request.app.state.context
    key = await anyio.to_thread.run_sync(
        archive_key, context.settings.render.archive_key_file, context.dispatcher.sync_redis)
    return JSONResponse({"algorithm": "ECDSA P-384 SHA-256", "public_key": public_key(key)})
