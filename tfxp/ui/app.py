"""The console's web app: a Starlette app over one ML Metadata store, read-only.

Security model (docs/console.md):
- no route writes: every route is GET, the store is opened read-only;
- on a loopback address only loopback Host headers are answered (a web page
  elsewhere cannot reach the console through DNS rebinding); on any other
  address every request needs the access token (`Authorization: Bearer`, the
  `tfxp_ui_token` cookie, or `?token=` once, which sets the cookie), compared
  in constant time;
- files are served only from under the URI of an artifact the store knows;
- every value from data is escaped by Jinja2's autoescape (and `|tojson` where
  it goes into a script's JSON); pages load scripts only from the app itself
  (Content-Security-Policy: script-src 'self').
"""

from __future__ import annotations

import logging
import os
import time
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from runtime.access import LOOPBACK_NAMES, log_refused, token_matches
from tfxp.monitor.sampler import Sampler
from tfxp.ui.browse import StoreBrowser

__all__ = ["create_app"]

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN_COOKIE = "tfxp_ui_token"  # noqa: S105 - the cookie's name, not a token
# Scripts and styles from the app only; plotly.js needs inline style attributes.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'self'; "
    "form-action 'self'"
)


class Guard:
    """ASGI middleware: the Host check on loopback, the token elsewhere, security headers."""

    def __init__(self, app, token: str | None, loopback: bool) -> None:
        self.app = app
        self.token = token
        self.loopback = loopback

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refused = self.refusal(request)
        if refused is not None:
            await refused(scope, receive, send)
            return

        started = time.perf_counter()

        async def with_headers(message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                # The app's own time for this page (benchmarks/ui.py reads it).
                spent = (time.perf_counter() - started) * 1000
                headers.append((b"server-timing", f"app;dur={spent:.1f}".encode()))
                names = {k.lower() for k, _ in headers}
                for name, value in (
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"x-frame-options", b"SAMEORIGIN"),
                ):
                    if name not in names:
                        headers.append((name, value))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)

    def refusal(self, request: Request) -> Response | None:
        if request.method not in ("GET", "HEAD"):
            return PlainTextResponse("the console is read-only\n", status_code=405)
        host = (request.headers.get("host") or "").rsplit(":", 1)[0]
        if self.loopback and self.token is None and host not in LOOPBACK_NAMES:
            return PlainTextResponse(f"unknown host {host!r}\n", status_code=400)
        if self.token is None:
            return None
        auth = request.headers.get("authorization", "")
        given = auth[7:] if auth.lower().startswith("bearer ") else None
        if token_matches(given, self.token):
            return None
        if token_matches(request.cookies.get(TOKEN_COOKIE), self.token):
            return None
        if token_matches(request.query_params.get("token"), self.token):
            # Once: the cookie carries it from now on, and the address bar loses it.
            query = urlencode([kv for kv in request.query_params.multi_items() if kv[0] != "token"])
            target = request.url.path + (f"?{query}" if query else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
            return response
        client = request.client.host if request.client else "?"
        log_refused(logging.getLogger("tfxp.ui"), 401, request.method, request.url.path, client)
        return PlainTextResponse(
            "401: this console needs its access token (printed by `tfxp ui` at start): "
            "open the address it printed, with ?token=...\n",
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )


def create_app(
    browser: StoreBrowser,
    *,
    token: str | None = None,
    loopback: bool = True,
    sampler: Sampler | None = None,
) -> Starlette:
    """The console over `browser`'s store. `token`: required on every request (None:
    none needed, which `tfxp ui` allows on loopback addresses only). `sampler`: a
    server's metrics sampled in the background, for the Serving page's charts."""
    import jinja2

    from tfxp.ui import pages

    # Autoescape on every template, whatever its name: data values are never markup.
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.path.join(HERE, "templates")), autoescape=True
    )
    pages.add_filters(env)
    templates = Jinja2Templates(env=env)
    routes = [
        *pages.routes(),
        Mount("/static", app=StaticFiles(directory=os.path.join(HERE, "static")), name="static"),
        Route("/static-vendor/plotly.min.js", pages.plotly_js, name="plotly"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(Guard, token=token, loopback=loopback)],
        exception_handlers=pages.exception_handlers(),
    )
    app.state.browser = browser
    app.state.sampler = sampler
    app.state.templates = templates
    return app
