"""scripts/mariadb.sh: servers started side by side do not break each other.

A starting MariaDB server deletes every `#sql*` file in its tmpdir as a crash
leftover, live temporary tables of other servers included. With the default
tmpdir (/tmp), a server starting on one xdist worker broke another worker's
`mariadb-install-db` ("Unknown table 'mysql.tmp_proxies_priv'"). Each server
now has a temp dir of its own; this test fails without it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mariadb_server import running_mariadb

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_a_starting_server_leaves_another_servers_temporary_tables(tmp_path: Path) -> None:
    import pymysql

    with running_mariadb(tmp_path / "a", "first") as first:
        # A temporary table lives as long as its connection: keep one open.
        connection = pymysql.connect(
            host=first.host,
            port=first.port,
            user=first.user,
            password=first.password,
            database=first.database,
        )
        with connection, connection.cursor() as cursor:
            cursor.execute("CREATE TEMPORARY TABLE t (x INT) ENGINE=MyISAM")
            cursor.execute("INSERT INTO t VALUES (7)")
            cursor.execute("SELECT @@tmpdir")
            tmpdir = Path(cursor.fetchone()[0])
            assert tmpdir == (tmp_path / "a" / "tmp").resolve()
            files = sorted(tmpdir.glob("#sql*"))
            assert files, "the temporary table has no file in the tmpdir"
            with running_mariadb(tmp_path / "b", "second"):
                pass  # its install and start-up clean up a tmpdir: its own only
            # With a shared /tmp these files were gone here (the open table still
            # read, from its open descriptors; mariadb-install-db's was dropped by name).
            assert sorted(tmpdir.glob("#sql*")) == files
            cursor.execute("SELECT x FROM t")
            assert cursor.fetchall() == ((7,),)
