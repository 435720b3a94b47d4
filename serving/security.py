"""Who may call the server: loopback by default, a bearer token anywhere else.

The same rules as the console (`tfxp ui`; the helpers of runtime/access.py): on a loopback address only loopback Host headers are answered (a
web page elsewhere cannot reach the server through DNS rebinding); on any
other address every request needs `Authorization: Bearer <token>` (gRPC: the
`authorization` metadata), compared in constant time. Health probes need no
token: they tell nothing but "up".
"""

from __future__ import annotations

from runtime.access import LOOPBACK_NAMES, token_matches

__all__ = ["check", "bearer_matches", "PROXY_HELP"]

PROXY_HELP = (
    "to serve other machines without a token of its own, keep `tfxp serve` on 127.0.0.1 and put "
    "a reverse proxy in front of it that does the authentication (e.g. nginx with "
    "`proxy_pass http://127.0.0.1:8501;` and `auth_basic`, or your load balancer's OIDC)"
)


def bearer_matches(authorization: str | None, token: str) -> bool:
    auth = authorization or ""
    given = auth[7:] if auth.lower().startswith("bearer ") else None
    return token_matches(given, token)


def check(headers: dict[bytes, bytes], token: str | None, loopback: bool):
    """None when the request may go on, else (status, JSON body, headers)."""
    if token is None:
        if loopback:
            host = headers.get(b"host", b"").decode("latin-1")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name not in LOOPBACK_NAMES:
                return 400, {"error": f"unknown host {name!r}: this server answers loopback only"}
        return None
    if bearer_matches(headers.get(b"authorization", b"").decode("latin-1"), token):
        return None
    return (
        401,
        {"error": "this server needs its access token: send `Authorization: Bearer <token>`"},
        [(b"www-authenticate", b"Bearer")],
    )
