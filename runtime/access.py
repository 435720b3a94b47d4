"""Who may call a server of ours (the console, `tfxp serve`): loopback names and access tokens.

Off loopback every request needs the access token, compared in constant time;
on loopback only loopback Host headers are answered, so a web page elsewhere
cannot reach the server through DNS rebinding.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import secrets
import stat
from collections.abc import Mapping

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


class SecretFileError(ValueError):
    """A secret file (token, key) that is missing, empty or readable by others."""


def check_owner_only(path: str | os.PathLike, what: str) -> None:
    """Refuses a secret file that anyone but its owner may read or write.

    The check is on the file's mode only: the directory's permissions and who
    else is root stay the user's business (docs/protecting-data.md).
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise SecretFileError(f"{what} {path}: cannot be read ({e.strerror})") from None
    if not stat.S_ISREG(mode):
        raise SecretFileError(f"{what} {path}: not a regular file")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SecretFileError(
            f"{what} {path} is readable or writable by group or others (mode "
            f"{stat.S_IMODE(mode):o}); make it owner-only: chmod 600 {path}"
        )


def read_token_file(path: str | os.PathLike, what: str = "--token-file") -> str:
    """The access token in `path` (first line, stripped): owner-only and not empty."""
    check_owner_only(path, what)
    with open(path, encoding="utf-8") as f:
        token = f.readline().strip()
    if not token:
        raise SecretFileError(f"{what} {path} is empty; put the access token on its first line")
    return token


def log_refused(logger: logging.Logger, status: int, method: str, path: str, client: str) -> None:
    """One line per refused request: who and what, never the body or the token sent."""
    logger.warning(
        "refused %s %s from %s: %d (no valid access token)", method, path, client, status
    )


# The umasks Linux distributions set by default: a user who kept one made no choice.
DISTRIBUTION_UMASKS = (0o022, 0o002)
UMASK_ENV = "TFXP_UMASK"


def owner_only_umask(env: Mapping[str, str] | None = None) -> int:
    """Makes what this process creates owner-only (umask 077) unless the user chose.

    Serving logs, validation reports, model cards and predictions hold data.
    A umask other than the distributions' defaults, or `TFXP_UMASK` (octal,
    e.g. 027 for a group that shares the runs), is the user's choice and kept.
    Returns the umask in effect.
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    current = os.umask(0o077)
    chosen = environ.get(UMASK_ENV)
    if chosen:
        try:
            wanted = int(chosen, 8)
        except ValueError:
            os.umask(current)
            raise ValueError(f"{UMASK_ENV}={chosen!r} is not an octal umask (e.g. 077)") from None
    else:
        wanted = 0o077 if current in DISTRIBUTION_UMASKS else current
    os.umask(wanted)
    return wanted
