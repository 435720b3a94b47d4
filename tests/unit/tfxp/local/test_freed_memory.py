"""A finished component's freed heap goes back to the system before the next one starts."""

from __future__ import annotations

import logging

import psutil
import pytest

from tfxp.local import process, progress


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


@pytest.mark.skipif(process._libc() is None, reason="glibc's malloc_trim only")
def test_freed_heap_is_returned_to_the_system():
    # 1 KB blocks: malloc's heap (not mmap), freed in the middle of the heap's life.
    blocks = [bytearray(1024) for _ in range(300_000)]
    keep = bytearray(1024)  # allocated last: the heap cannot simply shrink from its top
    held = _rss_mb()
    del blocks
    freed = _rss_mb()
    process.return_freed_memory()
    returned = _rss_mb()
    assert held - returned > 200, (held, freed, returned)
    assert len(keep) == 1024


def test_the_progress_handler_returns_memory_when_a_component_finishes(monkeypatch):
    calls = []
    monkeypatch.setattr(progress, "return_freed_memory", lambda: calls.append(1))
    handler = progress.ProgressHandler(2, lambda _: None)
    for msg in ("Component %s is running.", "Component %s is finished."):
        handler.emit(logging.makeLogRecord({"msg": msg, "args": ("Transform",)}))
    assert calls == [1]
