"""The playground (`/playground`, `/` redirects there): a static page that builds its form from the API's
own OpenAPI schema and calls the API from the browser. No build step; nothing leaves this origin."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response
from starlette.exceptions import HTTPException

router = APIRouter(include_in_schema=False)
FILES = Path(__file__).resolve().parent.parent / "playground"
CONTENT_TYPES = {"index.html": "text/html; charset=utf-8", "playground.js": "text/javascript; charset=utf-8",
                 "watch.js": "text/javascript; charset=utf-8",
                 "playground.css": "text/css; charset=utf-8", "sdks.json": "application/json"}
# Only this origin: the page's own script and style, the API, and the captures shown as blob: URLs.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self' blob:; media-src 'self' blob:; frame-src 'self' blob:; "
                               "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


def _file(name: str) -> Response:
    return Response((FILES / name).read_bytes(), media_type=CONTENT_TYPES[name], headers=SECURITY_HEADERS)


@router.get("/")
async def root() -> Response:
    return RedirectResponse("/playground", status_code=307)


@router.get("/playground")
async def playground() -> Response:
    return _file("index.html")


@router.get("/playground/{name}")
async def playground_asset(name: str) -> Response:
    if name not in CONTENT_TYPES or name == "index.html":
        raise HTTPException(404)  # answered with the error body, route_not_found
    return _file(name)
