"""`/docs` (Swagger UI) and `/redoc` (ReDoc) of /openapi.json, with their scripts and styles from the pinned
fastapi-offline package (MIT; it ships Swagger UI 5 and ReDoc 2) rather than a CDN, so they work on closed
networks. A Content-Security-Policy keeps the pages on this origin: ReDoc would otherwise fetch its logo
from cdn.redoc.ly, telling a third party who reads these docs."""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

router = APIRouter(include_in_schema=False)
ASSETS = "/docs-assets"
# Swagger UI starts from an inline script; ReDoc runs its search in a worker made from a blob.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' "
                               "'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; worker-src 'self' "
                               "blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
                               "frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


def _root(request: Request) -> str:
    return str(request.scope.get("root_path", ""))


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    root = _root(request)
    page = get_swagger_ui_html(
        openapi_url=f"{root}/openapi.json", title="screenshot-service: API",
        swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js", swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSETS}/favicon.png", oauth2_redirect_url=None)
    return HTMLResponse(page.body, headers=SECURITY_HEADERS)


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    root = _root(request)
    page = get_redoc_html(openapi_url=f"{root}/openapi.json", title="screenshot-service: API",
                          redoc_js_url=f"{root}{ASSETS}/redoc.standalone.js",
                          redoc_favicon_url=f"{root}{ASSETS}/favicon.png", with_google_fonts=False)
    return HTMLResponse(page.body, headers=SECURITY_HEADERS)


def install(app: FastAPI) -> None:
    """The two pages and their assets on `app` (created with docs_url=None, redoc_url=None)."""
    app.mount(ASSETS, StaticFiles(directory=str(files("fastapi_offline") / "static")), name="docs-assets")
    app.include_router(router)
