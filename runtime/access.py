"""Who may call a server of ours (the console, `tfxp serve`): loopback names and access tokens.

Off loopback every request needs the access token, compared in constant time;
on loopback only loopback Host headers are answered, so a web page elsewhere
cannot reach the server through DNS rebinding.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    return secrets.token_urlsafe(24)


def token_matches(given: str | None, token: str) -> bool:
    """Constant time: how much of a guess is right must not show in the answer's timing."""
    return given is not None and hmac.compare_digest(given.encode(), token.encode())
