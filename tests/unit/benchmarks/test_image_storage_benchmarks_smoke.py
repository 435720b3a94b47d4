"""The image and object-storage benchmarks still run: each on tiny sizes, or its report
and helpers alone (what tests/unit/benchmarks/test_benchmarks_smoke.py does for the others;
its docstring says why benchmarks get smoke tests)."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
from benchmark_scripts import load_benchmark, run_benchmark  # tests/support/


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_image_benchmarks_on_a_few_images(tmp_path, forkserver):
    work = str(tmp_path / "images")
    run_benchmark(
        forkserver, "image_ingest.py", "--count", "40", "--size", "16", "--work", work, timeout=600
    )
    run_benchmark(
        forkserver,
        "image_read.py",
        "--work",
        work,
        "--images",
        "40",
        "--size",
        "16",
        "--batch",
        "8",
        timeout=400,
    )


def test_object_storage_ingest_report_prints_the_ratio_and_the_readers():
    bench = load_benchmark("object_storage.py")
    side = {"do_cpu": 1.0, "rows": 1000, "component": 5.0}
    report = {
        "rows": 1000,
        "csv_bytes": 2_000_000,
        "same_bytes": True,
        "local": {**side, "do": 2.0, "reader": "arrow"},
        "bucket": {**side, "do": 4.0, "reader": "arrow"},
    }
    text = bench.render_ingest(report)
    assert "ratio bucket / local, ingest rows/s: 0.50" in text
    assert "same reader on both sides: yes (arrow)" in text and "same shard bytes: yes" in text
    report["bucket"]["reader"] = "tfx"
    assert "same reader on both sides: NO" in bench.render_ingest(report)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_object_storage_benchmark_ingest_mode_on_a_few_rows(forkserver):
    """Starts its own SeaweedFS; the same Arrow reader on both sides, the same bytes."""
    done = run_benchmark(
        forkserver,
        "object_storage.py",
        "--ingest-only",
        "--ingest-rows",
        "2000",
        "--one-child",
        timeout=800,
    )
    assert "ratio bucket / local, ingest rows/s:" in done.stdout
    assert "same reader on both sides: yes (arrow)" in done.stdout
    assert "same shard bytes: yes" in done.stdout


@pytest.mark.parametrize("one_child", [False, True])
def test_object_storage_ingests_each_side_in_a_fresh_child_unless_one_child(
    tmp_path, monkeypatch, one_child
):
    bench = load_benchmark("object_storage.py")
    children = []

    def checked(cmd, env=None, **kw):
        if cmd[:2] == [sys.executable, "-c"]:
            sides = cmd[3:]
            children.append(sides[1::3])
            timed = {"do": 1.0, "do_cpu": 1.0, "component": 1.0, "reader": "arrow"}
            return "\n".join(json.dumps(timed) for _ in sides[::3])
        return ""

    monkeypatch.setattr(bench, "_checked", checked)
    monkeypatch.setattr(bench, "_shard_bytes", lambda run_dir: {})
    report = bench.ingest_comparison(tmp_path, {}, 10, one_child)
    local = str(tmp_path / "ingest-data")
    bucket = "s3://bench/ingest"
    assert children == ([[local, bucket]] if one_child else [[local], [bucket]])
    assert report["local"]["reader"] == report["bucket"]["reader"] == "arrow"
    assert ("not a measurement" in bench.render_ingest(report)) is one_child


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_image_scale_benchmark_on_a_few_images(tmp_path, forkserver):
    """Every side runs (ingest three ways, files vs shards warm and cold, a training step),
    the one `shards vs files:` line is printed and the renderer takes the JSON."""
    done = run_benchmark(
        forkserver,
        "image_scale.py",
        *("--images", "40", "--size", "32", "--classes", "4", "--read-images", "16"),
        *("--batch", "8", "--steps", "1", "--models", "cnn", "--repeats", "1"),
        *("--cache", str(tmp_path), "--json"),
        timeout=800,
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("shards vs files:")]
    assert len(lines) == 1, done.stdout[-3000:]
    assert re.fullmatch(r"shards vs files: throughput \d+\.\d\dx, peak memory \d+\.\d\dx", lines[0])
    result = json.loads(done.stdout[done.stdout.index("\n{") + 1 :])
    ingest = result["ingest"]
    # Every writer wrote every image (broken=False), read back from its own output.
    assert [ingest[s]["records"] for s in ("ours", "seed", "import")] == [40, 40, 40]
    read = result["read"]
    sides = ("files_default", "files_tuned", "shards", "files_tuned_cold", "shards_cold")
    for side in (*sides, "shards_window256"):
        assert read[side]["images"] >= 16 and read[side]["peak_rss_mb"] > 0
    # A pass called cold was: DONTNEED left none of a sample in the page cache (on tmpfs,
    # where pages cannot be dropped, the pass says so instead).
    for side in ("files_tuned_cold", "shards_cold"):
        cold = read[side]["page_cache"] == "cold"
        assert cold == (read[side]["resident_after_drop"] == 0.0), read[side]
    assert read["disk"]["files_mb_per_s"] > 0 and read["disk"]["shards_mb_per_s"] > 0
    assert result["compute"]["cnn"]["images_per_s"] > 0
    render = load_benchmark("render_results.py")
    text = "\n".join(render.render_image_scale(result))
    assert "**shards vs files: throughput" in text and "DeepLearningExamples" in text


def test_image_scale_drops_a_file_from_the_page_cache(tmp_path):
    sides = load_benchmark("image_scale_sides.py")
    path = tmp_path / "blob"
    path.write_bytes(os.urandom(4 << 20))
    os.sync()  # DONTNEED drops clean pages only
    sides.warm([path])
    before = sides.resident_fraction([str(path)])
    if before is None or before < 0.9:
        pytest.skip(f"no page cache to measure on {tmp_path} (resident {before})")
    after = sides.drop_cache([str(path)])
    if after == before:  # tmpfs: its pages are the file itself
        pytest.skip(f"{tmp_path} keeps its pages (tmpfs?)")
    assert after < 0.5


def test_image_scale_says_which_side_bounds_training():
    bench = load_benchmark("image_scale.py")
    read = {"shards": {"images_per_s": 100.0}}
    compute = {"cnn": {"images_per_s": 40.0}, "mobilenet_v2": {"images_per_s": 400.0}}
    v = bench.verdicts(read, compute)
    assert v["bound_by"] == {"cnn": "compute", "mobilenet_v2": "input"}
    gpu = v["gpu_reference"]["images_per_s"]
    assert v["gpu_needs_x_input"] == round(gpu / 100.0, 1)
    assert v["gpu_reference"]["source"].startswith("https://")
