"""Span folders: selection, pre-flight errors, atomic publishing, content fingerprints, windows."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from components.io.content_fingerprint import files_sha256
from pipeline import spans
from pipeline.config import PipelineConfig
from pipeline.spans import SpanError, select_spans
from tfxp.datasets import publish
from tfxp.datasets.publish import publish_span

HEADER = "fare,tips,payment_type\n"
COLUMNS = {"fare": "FLOAT", "tips": "FLOAT", "payment_type": "BYTES"}


def _span(root: Path, n: int, body: str = "1.0,0.5,Cash\n", name: str = "data.csv") -> Path:
    folder = root / f"span-{n}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(HEADER + body)
    return folder


def _config(root: Path, **kw) -> PipelineConfig:
    return PipelineConfig(data_root=str(root), run_dir=str(root.parent / "run")).replace(**kw)


def test_latest_span_by_default_and_numeric_order(tmp_path):
    for n in (1, 2, 10):
        _span(tmp_path, n)
    assert [s.span for s in select_spans(_config(tmp_path))] == [10]
    assert [s.span for s in select_spans(_config(tmp_path, span=2))] == [2]
    assert [s.span for s in select_spans(_config(tmp_path, window=2))] == [2, 10]
    assert [s.span for s in select_spans(_config(tmp_path, span=2, window=2))] == [1, 2]


def test_pinned_span_that_does_not_exist(tmp_path):
    _span(tmp_path, 1)
    _span(tmp_path, 2)
    with pytest.raises(SpanError, match=r"span 7 does not exist .*spans there: 1, 2"):
        select_spans(_config(tmp_path, span=7))


def test_empty_span_folder_is_an_error(tmp_path):
    _span(tmp_path, 1)
    (tmp_path / "span-2").mkdir()
    with pytest.raises(SpanError, match=r"span 2 folder .* is empty"):
        select_spans(_config(tmp_path))


def test_no_span_folders(tmp_path):
    with pytest.raises(SpanError, match="no span folders"):
        select_spans(_config(tmp_path))


def test_files_of_one_span_disagree_on_columns(tmp_path):
    folder = _span(tmp_path, 1)
    (folder / "more.csv").write_text("fare,payment_type\n1.0,Cash\n")
    with pytest.raises(SpanError, match=r"more.csv has different columns .*missing tips"):
        select_spans(_config(tmp_path))


def test_window_longer_than_the_spans(tmp_path):
    _span(tmp_path, 1)
    with pytest.raises(SpanError, match="--window 3 ending at span 1 needs 3 spans"):
        select_spans(_config(tmp_path, window=3))


def test_versions(tmp_path):
    for span, version in ((1, 1), (1, 2), (2, 1)):
        folder = tmp_path / f"span-{span}" / f"version-{version}"
        folder.mkdir(parents=True)
        (folder / "data.csv").write_text(HEADER + "1.0,0.5,Cash\n")
    config = _config(tmp_path)
    assert spans.input_pattern(config) == spans.VERSIONED_PATTERN
    assert [(s.span, s.version) for s in select_spans(config)] == [(2, 1)]
    assert [(s.span, s.version) for s in select_spans(_config(tmp_path, span=1))] == [(1, 2)]
    pinned = select_spans(_config(tmp_path, span=1, version=1))
    assert [(s.span, s.version) for s in pinned] == [(1, 1)]
    with pytest.raises(SpanError, match="has no version 5"):
        select_spans(_config(tmp_path, span=1, version=5))
    with pytest.raises(SpanError, match="--version needs --span"):
        select_spans(_config(tmp_path, version=1))
    _span(tmp_path, 3)
    with pytest.raises(SpanError, match="mixes layouts"):
        select_spans(_config(tmp_path))


def test_unversioned_layout_pattern(tmp_path):
    _span(tmp_path, 1)
    assert spans.input_pattern(_config(tmp_path)) == spans.UNVERSIONED_PATTERN


def test_publish_span_is_next_number_and_complete(tmp_path):
    _span(tmp_path, 1)
    _span(tmp_path, 4)
    src = tmp_path.parent / f"drop-{tmp_path.name}"
    src.mkdir()
    (src / "a.csv").write_text(HEADER + "2.0,0.0,Cash\n")
    (src / "b.csv").write_text(HEADER + "3.0,1.0,Credit Card\n")
    made = publish_span(
        tmp_path,
        lambda d: publish.copy_files([src / "a.csv", src / "b.csv"], d),
        columns=COLUMNS,
    )
    assert made.span == 5 and made.path == tmp_path / "span-5"
    assert sorted(p.name for p in made.path.iterdir()) == ["a.csv", "b.csv"]
    assert publish.leftover_incoming(tmp_path) == []


def test_publish_crash_mid_copy_leaves_no_visible_span(tmp_path, monkeypatch):
    _span(tmp_path, 1)
    src = tmp_path.parent / f"drop-{tmp_path.name}"
    src.mkdir()
    for name in ("a.csv", "b.csv"):
        (src / name).write_text(HEADER + "2.0,0.0,Cash\n")
    real_copy = shutil.copyfile
    calls = []

    def crash_on_second(a, b, *args, **kwargs):
        calls.append(a)
        if len(calls) == 2:
            # Half of the second file is on disk when the "crash" happens.
            Path(b).write_text(HEADER)
            raise OSError("disk unplugged")
        return real_copy(a, b, *args, **kwargs)

    monkeypatch.setattr(publish.shutil, "copyfile", crash_on_second)
    with pytest.raises(OSError, match="disk unplugged"):
        publish_span(
            tmp_path,
            lambda d: publish.copy_files([src / "a.csv", src / "b.csv"], d),
            columns=COLUMNS,
        )
    assert [s.span for s in spans.list_spans(tmp_path)] == [1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["span-1"]
    # Even a hard kill (no cleanup) leaves only a hidden folder no run ingests.
    (tmp_path / ".incoming-dead").mkdir()
    (tmp_path / ".incoming-dead" / "x.csv").write_text(HEADER)
    assert [s.span for s in select_spans(_config(tmp_path))] == [1]
    assert publish.leftover_incoming(tmp_path) == [tmp_path / ".incoming-dead"]


def test_publish_rejects_bad_csv_and_publishes_nothing(tmp_path):
    src = tmp_path.parent / f"bad-{tmp_path.name}.csv"
    src.write_text(HEADER + "twelve,0.0,Cash\n")
    with pytest.raises(ValueError, match="'twelve'"):
        publish_span(tmp_path, lambda d: publish.copy_files([src], d), columns=COLUMNS)
    assert list(tmp_path.iterdir()) == []


def test_content_fingerprint_sees_same_size_same_mtime_edit(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text(HEADER + "1.0,0.5,Cash\n")
    before = files_sha256([str(path)], str(tmp_path))
    stat = path.stat()
    path.write_text(HEADER + "1.0,0.6,Cash\n")  # same size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    after = files_sha256([str(path)], str(tmp_path))
    assert after[0] != before[0] and after[1] == before[1]
    path.write_text(HEADER + "1.0,0.5,Cash\n")
    assert files_sha256([str(path)], str(tmp_path)) == before  # content, not mtime
    renamed = tmp_path / "other.csv"
    path.rename(renamed)
    assert files_sha256([str(renamed)], str(tmp_path))[0] != before[0]


def _examples(id_: int, span: int, version: int | None = None, base: str = "/d"):
    from tfx.types import standard_artifacts

    a = standard_artifacts.Examples()
    a.id = id_
    a.set_int_custom_property("span", span)
    if version is not None:
        a.set_int_custom_property("version", version)
    a.set_string_custom_property("input_base", base)
    a.set_string_custom_property("content_sha256", f"h{id_}")
    return a


def test_window_takes_newest_artifact_per_span():
    from components.resolvers.span_window import window_of_spans

    arts = [
        _examples(1, 1),
        _examples(2, 2),
        _examples(3, 3),
        _examples(4, 2),  # span 2 re-ingested (content changed)
        _examples(5, 4, base="/elsewhere"),
        _examples(6, 5),
    ]
    picked = window_of_spans(arts, 2, end_span=3, input_base="/d")
    assert [a.id for a in picked] == [4, 3]
    assert [a.id for a in window_of_spans(arts, 3, end_span=99, input_base="/d")] == [4, 3, 6]
    versioned = [_examples(1, 1, 1), _examples(2, 1, 2), _examples(3, 1, 1)]
    assert [a.id for a in window_of_spans(versioned, 1, end_span=1)] == [2]


def test_shards_sized_for_the_data():
    from components.example_gen.csv_options import RAW_BYTES_PER_SHARD, shards_for

    assert shards_for(1000, 2 / 3) == 1
    assert shards_for(10 * RAW_BYTES_PER_SHARD, 0.5) == 5
    assert shards_for(10 * RAW_BYTES_PER_SHARD, 0.5, configured=3) == 3
