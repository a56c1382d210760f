"""/dashboard: the single page, its static files and its defaults (no account data in them, so
no signature needed)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from api.dashboard import endpoints, jobs, models
from api.deps import SettingsDep

STATIC_DIR = Path(__file__).with_name("static")

router = APIRouter(prefix="/dashboard", tags=["dashboard"], include_in_schema=False)


@router.get("")
def dashboard_index() -> FileResponse:
    # no-cache: after an upgrade the browser must not keep running old modules against a new api.
    return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})


@router.get("/")
def dashboard_index_slash() -> RedirectResponse:
    return RedirectResponse("/dashboard")


@router.get("/defaults")
def dashboard_defaults(settings: SettingsDep) -> dict[str, str]:
    """What the sign-in form starts with: the stack's default region. A signed request's region is
    the one in its credential scope, so the region the user signs in with is the one they see."""
    return {"region": settings.default_region}


def include_dashboard(app: FastAPI) -> None:
    """The page, its files under /dashboard/static, and the JSON routes it calls."""
    app.include_router(router)
    app.include_router(jobs.router)
    app.include_router(models.router)
    app.include_router(endpoints.router)
    app.mount("/dashboard/static", StaticFiles(directory=STATIC_DIR), name="dashboard-static")
