"""Which ML Metadata store a command reads: the run directory's SQLite file, or MySQL.

The flags are the CLI's (tfxp/cli/common.py `add_store_flags`, `store_location`):

    --run-dir DIR                  SQLite at DIR/metadata.sqlite (default runs/<pipeline>)
    --mysql-host H [--mysql-port P] --mysql-database D --mysql-user U
                                   MySQL/MariaDB; the password comes from MLMD_MYSQL_PASSWORD

Every MySQL flag also has an environment default (MLMD_MYSQL_HOST, MLMD_MYSQL_PORT,
MLMD_MYSQL_DATABASE, MLMD_MYSQL_USER), so a shell or CI job can point every
command at one server. `open_store` fails with one line that says what to do:
no store there, an empty or corrupt file, a server that does not answer, a
database that does not exist, a refused login.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PASSWORD_ENV = "MLMD_MYSQL_PASSWORD"  # noqa: S105 - the variable's name, not a password
ENV_PREFIX = "MLMD_MYSQL_"
DEFAULT_MYSQL_PORT = 3306
CONNECT_TIMEOUT_SECONDS = 5.0


class MetadataStoreError(RuntimeError):
    """The store cannot be opened or read; the message says what to do."""


@dataclass(frozen=True)
class StoreLocation:
    """Where an ML Metadata store is: a SQLite file, or a MySQL database."""

    sqlite_path: str | None = None
    mysql_host: str | None = None
    mysql_port: int = DEFAULT_MYSQL_PORT
    mysql_database: str | None = None
    mysql_user: str | None = None
    mysql_password: str | None = None

    @property
    def is_mysql(self) -> bool:
        return self.mysql_host is not None

    def describe(self) -> str:
        """Human words for messages; never includes the password."""
        if self.is_mysql:
            return (
                f"MySQL database '{self.mysql_database}' at {self.mysql_host}:{self.mysql_port} "
                f"(user {self.mysql_user})"
            )
        return f"ML Metadata store {self.sqlite_path}"

    def connection_config(self, *, create: bool = False, read_only: bool = True) -> Any:
        """An MLMD `ConnectionConfig`.

        `create=False` (queries) never creates anything: a missing SQLite file
        or MySQL database is an error instead of a new empty store. Pipeline
        runs pass `create=True, read_only=False`.
        """
        from ml_metadata.proto import metadata_store_pb2 as pb

        cfg = pb.ConnectionConfig()
        if self.is_mysql:
            cfg.mysql.host = self.mysql_host
            cfg.mysql.port = self.mysql_port
            cfg.mysql.database = self.mysql_database or ""
            cfg.mysql.user = self.mysql_user or ""
            if self.mysql_password:
                cfg.mysql.password = self.mysql_password
            cfg.mysql.skip_db_creation = not create
        else:
            cfg.sqlite.filename_uri = self.sqlite_path or ""
            mode = pb.SqliteMetadataSourceConfig
            if create:
                cfg.sqlite.connection_mode = mode.READWRITE_OPENCREATE
            else:
                cfg.sqlite.connection_mode = mode.READONLY if read_only else mode.READWRITE
        return cfg


def _env(environ: Mapping[str, str], name: str) -> str | None:
    return environ.get(ENV_PREFIX + name) or None


def location_from(
    *,
    run_dir: str | None = None,
    mysql_host: str | None = None,
    mysql_port: int | None = None,
    mysql_database: str | None = None,
    mysql_user: str | None = None,
    environ: Mapping[str, str] | None = None,
    default_run_dir: str | None = None,
) -> StoreLocation:
    """Flags first, then MLMD_MYSQL_* from the environment, then SQLite in the run dir."""
    env = os.environ if environ is None else environ
    host = mysql_host or _env(env, "HOST")
    if host and not run_dir:
        port_text = mysql_port if mysql_port is not None else _env(env, "PORT")
        try:
            port = int(port_text) if port_text is not None else DEFAULT_MYSQL_PORT
        except ValueError:
            raise MetadataStoreError(
                f"MLMD_MYSQL_PORT={port_text!r} is not a port number; set a number like 3306"
            ) from None
        database = mysql_database or _env(env, "DATABASE")
        user = mysql_user or _env(env, "USER")
        missing = [
            flag
            for flag, value in (("--mysql-database", database), ("--mysql-user", user))
            if not value
        ]
        if missing:
            raise MetadataStoreError(
                f"--mysql-host {host} also needs {' and '.join(missing)} "
                f"(or {', '.join('MLMD_MYSQL_' + m[8:].upper() for m in missing)})"
            )
        return StoreLocation(
            mysql_host=host,
            mysql_port=port,
            mysql_database=database,
            mysql_user=user,
            mysql_password=env.get(PASSWORD_ENV),
        )
    if mysql_host and run_dir:
        raise MetadataStoreError("give either --run-dir (SQLite) or --mysql-host (MySQL), not both")
    directory = run_dir or default_run_dir
    if not directory:
        raise MetadataStoreError("no store given: pass --run-dir or --mysql-host")
    return StoreLocation(sqlite_path=os.path.join(directory, "metadata.sqlite"))


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


def _check_reachable(location: StoreLocation) -> None:
    # MLMD's own connect gives "mysql_real_connect failed: errno: , error: " and
    # may retry for a long time; a plain TCP probe answers in milliseconds.
    try:
        with socket.create_connection(
            (location.mysql_host, location.mysql_port), timeout=CONNECT_TIMEOUT_SECONDS
        ):
            pass
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise MetadataStoreError(
            f"cannot reach MySQL at {location.mysql_host}:{location.mysql_port} ({reason}); "
            "start the server (scripts/mariadb.sh start DIR PORT) or fix --mysql-host/--mysql-port"
        ) from None


def open_store(location: StoreLocation, *, create: bool = False, writable: bool = False):
    """An MLMD `MetadataStore`, or MetadataStoreError with one line saying what to do.

    `writable`: an existing SQLite file opened for writing (the registry's alias changes).
    """
    from ml_metadata.metadata_store import metadata_store

    if location.is_mysql:
        _check_reachable(location)
    elif not create:
        path = location.sqlite_path or ""
        if not os.path.exists(path):
            raise MetadataStoreError(
                f"no ML Metadata store at {path}; run the pipeline first (tfxp run) or point "
                "--run-dir at a run directory (or --mysql-host at a MySQL store)"
            )
        if os.path.getsize(path) == 0:
            raise MetadataStoreError(
                f"ML Metadata store {path} is empty (0 bytes); delete it and run the pipeline, "
                "or point --run-dir at another run directory"
            )
    try:
        config = location.connection_config(create=create, read_only=not writable)
        store = metadata_store.MetadataStore(config)
        store.get_context_types()  # a corrupt file opens lazily: touch it now
    except Exception as e:  # noqa: BLE001 - MLMD raises RuntimeError / errors.* with C++ messages
        detail = _first_line(e)
        if location.is_mysql:
            if "access denied" in detail.lower() and "to database" in detail.lower():
                hint = (
                    f"database '{location.mysql_database}' does not exist or user "
                    f"'{location.mysql_user}' may not use it; check --mysql-database"
                )
            elif "access denied" in detail.lower():
                hint = f"login refused; check --mysql-user and {PASSWORD_ENV}"
            elif "unknown database" in detail.lower():
                hint = (
                    f"database '{location.mysql_database}' does not exist; check --mysql-database"
                )
            else:
                hint = "check the --mysql-* flags and that the server is a MySQL/MariaDB server"
            raise MetadataStoreError(
                f"cannot open {location.describe()}: {hint} ({detail})"
            ) from None
        raise MetadataStoreError(
            f"{location.describe()} is unreadable ({detail}); it is not an ML Metadata "
            "SQLite file or it is corrupt: point --run-dir at a run directory or restore it"
        ) from None
    return store


def check_sqlite_store(path: str) -> None:
    """An existing SQLite file at `path` opens read-write as an ML Metadata store (as a
    run opens it), or MetadataStoreError saying what to do. No file is fine: a run makes it."""
    if not os.path.exists(path):
        return
    if os.path.getsize(path) == 0:
        raise MetadataStoreError(
            f"ML Metadata store {path} is empty (0 bytes), probably from an interrupted "
            "creation; delete it to start a new store"
        )
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = path
    cfg.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE
    try:
        metadata_store.MetadataStore(cfg).get_context_types()
    except Exception as e:  # noqa: BLE001 - MLMD raises RuntimeError/errors.* for corrupt files
        raise MetadataStoreError(
            f"ML Metadata store {path} is unreadable ({_first_line(e)[:160]}); restore it from "
            "a backup, or move it aside to start a new store (the lineage of earlier runs "
            "is in that file)"
        ) from None


class LineageError(RuntimeError):
    """A question ML Metadata cannot answer as asked; the message says what to do."""
