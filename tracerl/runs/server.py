"""``tracerl dashboard``: a web page over run folders, served on 127.0.0.1.

    tracerl dashboard runs/demo runs/other      # these runs, overlaid
    tracerl dashboard --runs runs               # every run under runs/ (new ones appear)

The page (static/index.html, static/app.js, uPlot vendored from npm: no CDN, no build step)
asks this server for JSON and polls a live run every two seconds for new points. Run folders
are only read: metrics line by line, the span store opened read-only.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracerl.core.errors import TracerlError

from .folder import RunError, find_runs
from .views import RunView, views

STATIC = Path(__file__).parent / "static"


class Runs:
    """The runs a dashboard shows: those named, and those under ``root`` (rescanned)."""

    def __init__(self, paths: Sequence[Path | str] = (), root: Path | str | None = None):
        self.paths = [Path(p) for p in paths]
        self.root = Path(root) if root is not None else None
        self._views: dict[str, RunView] = views(self.paths)
        if self.root is not None:
            self.rescan()
        if not self._views and self.root is None:
            raise RunError("no run to show: pass run folders, or --runs DIR")

    def rescan(self) -> None:
        if self.root is None:
            return
        known = {v.path.resolve() for v in self._views.values()}
        fresh = [r.path for r in find_runs(self.root) if r.path.resolve() not in known]
        if fresh:
            self._views.update(views([*(v.path for v in self._views.values()), *fresh]))

    def names(self) -> list[str]:
        self.rescan()
        return list(self._views)

    def get(self, name: str) -> RunView:
        view = self._views.get(name)
        if view is None:
            raise KeyError(name)
        return view


def create_app(runs: Runs, *, api_key: str | None = None) -> Any:
    from fastapi import FastAPI, Request
    from fastapi.responses import FileResponse, JSONResponse
    from fastapi.staticfiles import StaticFiles

    app = FastAPI(title="tracerl dashboard", docs_url=None, redoc_url=None)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.middleware("http")
    async def guard(request: Request, call_next: Any) -> Any:
        if api_key is not None and request.url.path.startswith("/api/"):
            sent = request.headers.get("authorization", "").removeprefix("Bearer ")
            if not hmac.compare_digest(sent.encode(), api_key.encode()):
                return JSONResponse({"error": "missing or wrong API key: send 'Authorization: Bearer <key>' "
                                     "(open the page as /#key=<key>)"}, status_code=401)
        try:
            return await call_next(request)
        except KeyError as exc:
            return JSONResponse({"error": f"no run {exc.args[0]!r} here"}, status_code=404)
        except TracerlError as exc:  # a broken store or run: say so, keep serving
            return JSONResponse({"error": str(exc)}, status_code=422)

    @app.get("/", include_in_schema=False)
    def index() -> Any:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    @app.get("/api/runs")
    def list_runs() -> Any:
        out = []
        for name in runs.names():
            try:
                out.append(runs.get(name).info())
            except TracerlError as exc:
                out.append({"name": name, "status": "unreadable", "error": str(exc)})
        return out

    @app.get("/api/runs/{name}/metrics")
    def metrics(name: str, start: int = 0) -> Any:
        return runs.get(name).metrics(start)

    @app.get("/api/runs/{name}/episodes")
    def episodes(name: str, kind: str | None = None, step: int | None = None, task: str | None = None,
                 termination: str | None = None, agent: str | None = None, min_reward: float | None = None,
                 max_reward: float | None = None, cause: str | None = None, q: str | None = None,
                 offset: int = 0, limit: int = 200) -> Any:
        return runs.get(name).episode_rows(kind=kind, step=step, task=task, termination=termination, agent=agent,
                                           min_reward=min_reward, max_reward=max_reward, cause=cause, q=q,
                                           offset=max(0, offset), limit=min(max(1, limit), 1000))

    def one_episode(found: dict[str, Any] | None, name: str, episode_id: str) -> Any:
        if found is None:
            return JSONResponse({"error": f"no episode {episode_id!r} in run {name!r}"}, status_code=404)
        return found

    @app.get("/api/runs/{name}/episodes/{episode_id}")
    def episode(name: str, episode_id: str) -> Any:
        return one_episode(runs.get(name).episode(episode_id), name, episode_id)

    @app.get("/api/runs/{name}/episodes/{episode_id}/trainer")
    def trainer(name: str, episode_id: str) -> Any:
        return one_episode(runs.get(name).trainer_logprobs(episode_id), name, episode_id)

    @app.get("/api/runs/{name}/groups")
    def groups(name: str, step: int) -> Any:
        return runs.get(name).groups(step)

    @app.get("/api/runs/{name}/groups/{step}/{task_index}")
    def side_by_side(name: str, step: int, task_index: int) -> Any:
        return runs.get(name).side_by_side(step, task_index)

    @app.get("/api/runs/{name}/diagnosis")
    def diagnosis(name: str) -> Any:
        return runs.get(name).diagnosis()

    return app


def serve(runs: Runs, host: str = "127.0.0.1", port: int = 8765, api_key: str | None = None) -> None:
    """Serve the dashboard until Ctrl-C (binds first: a busy port is one line, at once)."""
    import uvicorn

    from tracerl.gateway.server import bind_socket, check_bind

    check_bind(host, api_key)
    sock = bind_socket(host, port)
    try:
        config = uvicorn.Config(create_app(runs, api_key=api_key), host=host, port=port, log_level="warning")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
