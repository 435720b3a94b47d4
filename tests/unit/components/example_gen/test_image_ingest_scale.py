"""ImageExampleGen on what real folders hold (data/photos.py's broken files) and at file counts
that exhaust file handles if a listing or a writer keeps them open."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from test_image_example_gen import run_executor

from components.example_gen import image_decode, image_listing
from components.example_gen import image_example_gen as ieg
from data import photos

TESTS = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def photo_ingest(tmp_path_factory):
    root = tmp_path_factory.mktemp("photos")
    made = photos.write_photos(root / "span-1", 60, size=32, classes=3, seed=1)
    out = tmp_path_factory.mktemp("photo-examples")
    artifact = run_executor(root, out, class_names=made["classes"])
    records = {}
    for shard in sorted(out.glob("Split-*/*.gz")):
        for record in tf.data.TFRecordDataset(str(shard), compression_type="GZIP"):
            f = tf.train.Example.FromString(record.numpy()).features.feature
            records[f["image"].bytes_list.value[0]] = f
    return root / "span-1", made, artifact, out, records


def _broken(made: dict, root: Path, outcome: str) -> dict[str, str]:
    return {str(root / b["path"]): b["kind"] for b in made["broken"] if b["ingest"] == outcome}


def test_every_bad_file_is_named_with_its_reason(photo_ingest):
    root, made, artifact, out, _ = photo_ingest
    named = json.loads(artifact.get_string_custom_property(ieg.BAD_IMAGES))
    report = json.loads((out / ieg.REPORT_FILE).read_text())
    assert report["bad"] == named
    reasons = dict(n.split(": ", 1) for n in named)
    bad = _broken(made, root, "bad")
    assert set(reasons) == set(bad) and artifact.get_int_custom_property(ieg.SKIPPED_IMAGES) == 4
    why = {bad[p]: reason for p, reason in reasons.items()}
    assert "truncated" in why["truncated-jpeg"]
    assert why["zero-bytes"] == "empty file (0 bytes)"
    assert why["not-an-image"] == "not an image file (no known image header)"


def test_os_files_are_ignored_and_counted_not_bad(photo_ingest):
    root, made, artifact, out, _ = photo_ingest
    report = json.loads((out / ieg.REPORT_FILE).read_text())
    assert report["ignored"] == sorted(_broken(made, root, "ignored"))  # incl. span-1/.DS_Store
    assert artifact.get_int_custom_property(ieg.IGNORED_FILES) == 3


def test_unusual_valid_images_are_stored_as_they_are(photo_ingest):
    root, made, artifact, _, records = photo_ingest
    kept = {kind: Path(p) for p, kind in _broken(made, root, "kept").items()}
    expected = {"cmyk-jpeg": (b"jpeg", 3), "grayscale-png": (b"png", 1), "16bit-png": (b"png", 1)}
    for kind, (fmt, channels) in expected.items():
        data = kept[kind].read_bytes()
        f = records[data]  # the file's bytes, not re-encoded
        assert f["format"].bytes_list.value == [fmt], kind
        assert f["channels"].int64_list.value == [channels], kind
        decoded = tf.io.decode_image(data, expand_animations=False)  # as the trainer reads it
        assert decoded.shape[-1] == channels and decoded.dtype == tf.uint8
        assert list(decoded.shape[:2]) == [
            f["height"].int64_list.value[0],
            f["width"].int64_list.value[0],
        ]
    assert artifact.get_int_custom_property(ieg.IMAGE_COUNT) == 60 + 3 == len(records)
    formats = json.loads(artifact.get_string_custom_property(ieg.IMAGE_FORMATS_SEEN))
    assert set(formats) == {"jpeg", "png"} and sum(formats.values()) == 63


def test_fail_policy_names_every_bad_file_and_publishes_nothing(photo_ingest, tmp_path):
    root, made, *_ = photo_ingest
    with pytest.raises(image_listing.ImageInputError) as e:
        run_executor(root.parent, tmp_path, class_names=made["classes"], on_bad_image="fail")
    assert all(p in str(e.value) for p in _broken(made, root, "bad"))
    assert "4 image file(s)" in str(e.value) and not list(tmp_path.glob("Split-*"))


def test_class_folders_stream_and_count_os_files_above_them(tmp_path):
    for name in ("a", "b", ".hidden"):
        (tmp_path / "span-1" / name).mkdir(parents=True)
    (tmp_path / "span-1" / "Thumbs.db").write_bytes(b"x")
    (tmp_path / "span-1" / "a" / "x.png").write_bytes(b"x")
    folders, ignored = image_listing.class_folders(str(tmp_path), "span-1/*/*", ["b", "a"])
    assert folders == [(str(tmp_path / "span-1" / "a"), 1), (str(tmp_path / "span-1" / "b"), 0)]
    assert ignored == [str(tmp_path / "span-1" / "Thumbs.db")]


_UNDER_ULIMIT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    from test_image_example_gen import run_executor
    from components.example_gen import image_example_gen as ieg
    classes = ["a", "b", "c", "d"]
    artifact = run_executor(Path(sys.argv[1]), Path(sys.argv[2]), class_names=classes)
    print(json.dumps({"images": artifact.get_int_custom_property(ieg.IMAGE_COUNT)}))
    """
)


def _write_tiny_pngs(span: Path, count: int) -> None:
    import numpy as np

    from data.images import encode_png

    rng = np.random.default_rng(0)
    distinct = [encode_png(rng.integers(0, 256, (8, 8), dtype=np.uint8)) for _ in range(997)]
    folders = [span / c for c in "abcd"]
    for folder in folders:
        folder.mkdir(parents=True)
    for i in range(count):
        (folders[i % 4] / f"{i:06d}.png").write_bytes(distinct[i % len(distinct)])


def _limit_open_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_twenty_thousand_files_under_ulimit_256(tmp_path):
    _write_tiny_pngs(tmp_path / "data" / "span-1", 20_000)
    done = subprocess.run(
        [sys.executable, "-c", _UNDER_ULIMIT, str(tmp_path / "data"), str(tmp_path / "out"), str(TESTS)],
        preexec_fn=_limit_open_files,
        capture_output=True,
        text=True,
        timeout=580,
        cwd=TESTS.parents[3],
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"images": 20_000}
    shards = list((tmp_path / "out").glob("Split-*/*.gz"))
    assert shards and not list((tmp_path / "out").glob("Split-*/*.incomplete"))


def test_raw_pixels_of_a_16_bit_png_are_what_tensorflow_decodes(photo_ingest):
    root, made, *_ = photo_ingest
    [path] = [root / b["path"] for b in made["broken"] if b["kind"] == "16bit-png"]
    data = path.read_bytes()
    pixels, fmt = image_decode.decode(data)  # image_format: raw stores these
    expected = tf.io.decode_image(data, expand_animations=False).numpy()
    assert fmt == "png" and pixels.max() > 0
    np.testing.assert_array_equal(pixels, expected)
