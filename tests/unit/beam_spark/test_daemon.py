"""The Python workers' daemon: per-task import-cache invalidation stays cheap, and the
preloaded heap is frozen before any fork."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import zipfile
import zipimport
from pathlib import Path

from beam_spark import daemon


def _zip(path: Path, modules: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in modules.items():
            archive.writestr(f"{name}.py", text)


def test_an_unchanged_archive_is_not_reread_and_a_changed_one_is(tmp_path, monkeypatch):
    archive = tmp_path / "mods.zip"
    _zip(archive, {"first_mod": "X = 1\n"})
    importer = zipimport.zipimporter(str(archive))
    reads: list[str] = []
    original = zipimport.zipimporter.invalidate_caches

    def counting(self):
        reads.append(self.archive)
        original(self)

    monkeypatch.setattr(zipimport.zipimporter, "invalidate_caches", counting)
    daemon.reread_changed_archives_only()
    reads.clear()
    importer.invalidate_caches()  # the first call stamps the archive
    importer.invalidate_caches()
    importer.invalidate_caches()
    assert reads == [str(archive)]
    # A rewritten archive (PySpark's addPyFile replacing a zip) is read again and seen.
    _zip(archive, {"first_mod": "X = 1\n", "second_mod": "Y = 2\n"})
    stat = archive.stat()
    os.utime(archive, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    importer.invalidate_caches()
    assert reads == [str(archive)] * 2
    assert importer.find_spec("second_mod") is not None


def test_patching_twice_keeps_one_wrapper(monkeypatch):
    monkeypatch.setattr(
        zipimport.zipimporter, "invalidate_caches", zipimport.zipimporter.invalidate_caches
    )
    daemon.reread_changed_archives_only()
    first = zipimport.zipimporter.invalidate_caches
    daemon.reread_changed_archives_only()
    assert zipimport.zipimporter.invalidate_caches is first
    importlib.invalidate_caches()


def test_the_daemon_freezes_what_it_imported_before_forking():
    """In a process of its own: a frozen heap is permanent for that process."""
    code = (
        "import gc; from beam_spark.daemon import freeze_heap; "
        "before = gc.get_freeze_count(); freeze_heap(); print(before, gc.get_freeze_count())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    before, after = int(out[-2]), int(out[-1])
    assert before == 0 and after > 10_000
