"""A private MariaDB server for tests of ML Metadata on MySQL (session fixture `mariadb_server`).

Started and stopped by `scripts/mariadb.sh` (the same script users and CI
run): data directory in pytest's temp dir, a free loopback port, its own
socket. When mariadb-server is missing, the fixture installs it with
`scripts/mariadb.sh install` (apt-get) if running as root, and otherwise
fails saying what to install.

Use it from a test module with `from mariadb_server import mariadb_server  # noqa: F401`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import system_packages

from trainer.ports import free_port

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "mariadb.sh"


@dataclass(frozen=True)
class MariaDB:
    host: str
    port: int
    database: str
    user: str
    password: str
    directory: Path

    def cli_flags(self) -> list[str]:
        """The `tfxp runs|lineage` flags for this store (the password goes in the env)."""
        return [
            "--mysql-host",
            self.host,
            "--mysql-port",
            str(self.port),
            "--mysql-database",
            self.database,
            "--mysql-user",
            self.user,
        ]

    def new_database(self, prefix: str) -> MariaDB:
        """The same server with a database of its own (fresh, unique name), for one test.

        Tests that count runs or executions must not see other tests' runs,
        which share this session's server and its default database.
        """
        import uuid

        name = f"{prefix}_{uuid.uuid4().hex[:8]}"
        created = subprocess.run(
            [
                str(SCRIPT),
                "start",
                str(self.directory),
                str(self.port),
                name,
                self.user,
                self.password,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if created.returncode != 0:
            pytest.fail(
                f"could not create database {name}:\n{created.stderr[-3000:]}", pytrace=False
            )
        return MariaDB(self.host, self.port, name, self.user, self.password, self.directory)

    def location(self):
        from metadata.store import StoreLocation

        return StoreLocation(
            mysql_host=self.host,
            mysql_port=self.port,
            mysql_database=self.database,
            mysql_user=self.user,
            mysql_password=self.password,
        )


def _installed() -> bool:
    return any(shutil.which(n) or os.path.exists(f"/usr/sbin/{n}") for n in ("mariadbd", "mysqld"))


def ensure_installed() -> None:
    system_packages.ensure_installed(_installed(), "mariadb.sh", "mariadb-server")


@contextlib.contextmanager
def running_mariadb(directory: Path, database: str) -> Iterator[MariaDB]:
    """A private MariaDB server in `directory` on a free port, with `database` and its user."""
    ensure_installed()
    server = MariaDB("127.0.0.1", free_port(), database, "mlmd", "mlmd-test-pw", directory)
    started = subprocess.run(
        [
            str(SCRIPT),
            "start",
            str(directory),
            str(server.port),
            server.database,
            server.user,
            server.password,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    if started.returncode != 0:
        pytest.fail(f"could not start MariaDB:\n{started.stderr[-3000:]}", pytrace=False)
    try:
        yield server
    finally:
        subprocess.run([str(SCRIPT), "stop", str(directory)], capture_output=True, timeout=90)


@pytest.fixture(scope="session")
def mariadb_server(tmp_path_factory: pytest.TempPathFactory):
    with running_mariadb(tmp_path_factory.mktemp("mariadb"), "mlmd_lineage") as server:
        yield server
