"""Stored results read through their signed, expiring links: `/files/{key}` (an object of local storage) and
`/slices/{key}` (the list of a full_page_slices capture's slices)."""

from __future__ import annotations

import time

import anyio
import orjson
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from service.api import openapi
from service.api.context import AppContext
from service.errors import SignatureNotValid
from service.results import SLICES_SIGNED
from storage.local import verify_file_signature

router = APIRouter(prefix="/v1/screenshot", tags=["account"])


@router.get("/slices/{key:path}", responses=openapi.json_responses("Slices", 400, 404),
            summary="The slices of a full_page_slices capture, through the signed, "
            "expiring link of x-service-full-page-slices-url")
async def slices(request: Request, key: str, expires: int = 0, signature: str = "") -> Response:
    context: AppContext = request.app.state.context
    if not verify_file_signature(context.url_secret, SLICES_SIGNED + key, expires, signature, time.time()):
        raise SignatureNotValid("This link has expired or was altered; request the screenshot again.")

    def read() -> bytes | None:
        return b"".join(context.storage.open(key)) if context.storage.stat(key) is not None else None

    stored = await anyio.to_thread.run_sync(read)
    if stored is None:
        raise SignatureNotValid("This link no longer points to stored slices; they may have been deleted.")
    return JSONResponse({"slices": context.links.slices(orjson.loads(stored)["slices"])})


@router.get("/files/{key:path}", responses=openapi.file_responses(),
            summary="Download a stored result through its signed, expiring link")
async def download(request: Request, key: str, expires: int = 0, signature: str = "") -> Response:
    context: AppContext = request.app.state.context
    if not verify_file_signature(context.url_secret, key, expires, signature, time.time()):
        raise SignatureNotValid("This link has expired or was altered; request a new screenshot_url.")
    stored = context.storage.stat(key)
    if stored is None:
        raise SignatureNotValid("This link no longer points to a stored object; it may have been deleted.")
    return StreamingResponse(context.storage.open(key), media_type=stored.content_type,
                             headers={"content-length": str(stored.size)})
