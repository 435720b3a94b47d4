"""data/photos.py: deterministic, mixed-size, learnable photos, with the broken files real folders have."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from data import photos
from tfxp.cli import main as tfxp_main


@pytest.fixture(scope="module")
def span(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("photos") / "span-1"
    return out, photos.write_photos(out, 300, size=48, classes=5, seed=3)


def _images(out: Path) -> list[Path]:
    return sorted(p for p in out.glob("*/0*") if p.suffix in (".jpg", ".png"))


def test_same_seed_same_bytes_other_seed_other_bytes(span, tmp_path):
    out, _ = span
    again = photos.write_photos(tmp_path / "a", 300, size=48, classes=5, seed=3, workers=2)
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    written = (tmp_path / "a").rglob("*")
    assert files == sorted(p.relative_to(tmp_path / "a") for p in written if p.is_file())
    assert all((out / f).read_bytes() == (tmp_path / "a" / f).read_bytes() for f in files)
    assert again["bytes"] == span[1]["bytes"]
    other = photos.write_photos(tmp_path / "b", 20, size=48, classes=5, seed=4, broken=False)
    first = sorted((tmp_path / "b").glob("*/0000000.*"))[0]
    assert first.read_bytes() != (out / first.relative_to(tmp_path / "b")).read_bytes()
    assert other["broken"] == [] and not list((tmp_path / "b").rglob(".DS_Store"))


def test_counts_formats_and_mixed_sizes(span):
    out, result = span
    files = _images(out)
    assert len(files) == result["images"] == 300
    assert result["counts"] == {name: 60 for name in photos.class_names(5)}
    assert result["bytes"] == sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    formats, sizes = [], set()
    for p in files:
        with Image.open(p) as img:
            formats.append(img.format)
            sizes.add(img.size)
            assert img.mode == "RGB" and not img.info.get("exif")
            assert min(img.size) >= 36 and max(img.size) <= 60  # 0.75-1.25 x 48
    assert 0.8 < formats.count("JPEG") / len(formats) < 0.97 and "PNG" in formats
    assert len(sizes) > 100 and sum(w != h for w, h in sizes) > 0.9 * len(sizes)


def test_broken_files_are_there_and_what_they_say(span):
    out, result = span
    kinds = {b["kind"] for b in result["broken"]}
    assert kinds == set(photos.BROKEN_KINDS)
    by_kind: dict[str, list[Path]] = {}
    for b in result["broken"]:
        by_kind.setdefault(b["kind"], []).append(out / b["path"])
        assert b["ingest"] == photos.BROKEN_KINDS[b["kind"]]
    for p in by_kind["truncated-jpeg"]:
        with Image.open(p) as img, pytest.raises(OSError, match="truncated"):
            img.load()
    assert by_kind["zero-bytes"][0].stat().st_size == 0
    with pytest.raises(Image.UnidentifiedImageError):
        Image.open(by_kind["not-an-image"][0])
    modes = {k: Image.open(by_kind[k][0]).mode for k in ("cmyk-jpeg", "grayscale-png", "16bit-png")}
    assert modes == {"cmyk-jpeg": "CMYK", "grayscale-png": "L", "16bit-png": "I;16"}
    names = {p.name for p in by_kind["os-metadata"]}
    assert names == {".DS_Store", "Thumbs.db"}


def test_a_nearest_centroid_on_8x8_pixels_beats_the_majority_class(span):
    out, _ = span
    xs, ys = [], []
    names = photos.class_names(5)
    for p in _images(out):
        with Image.open(p) as img:
            xs.append(np.asarray(img.resize((8, 8)), np.float32).ravel() / 255)
        ys.append(names.index(p.parent.name))
    x, y = np.stack(xs), np.asarray(ys)
    train = np.arange(len(y)) % 3 != 0
    centroids = np.stack([x[train & (y == c)].mean(0) for c in range(5)])
    predicted = ((x[~train, None, :] - centroids[None]) ** 2).sum(-1).argmin(1)
    accuracy = (predicted == y[~train]).mean()
    majority = np.bincount(y[~train]).max() / (~train).sum()
    assert accuracy > majority + 0.4, (accuracy, majority)


def test_encode_is_deterministic_jpeg_without_exif():
    _, pixels, _ = photos.photo(0, 32, 10)
    data = photos.encode(pixels, "jpeg")
    assert data == photos.encode(pixels, "jpeg") and data[:2] == b"\xff\xd8"
    assert b"Exif" not in data
    assert Image.open(io.BytesIO(data)).size == pixels.shape[1::-1]


def test_cli(tmp_path, capsys):
    out = tmp_path / "span-1"
    assert tfxp_main(["data", "generate", "photos", str(out), "--images", "12", "--size", "32",
                      "--classes", "3", "--no-broken"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "12/12 images" in printed and "images/s" in printed and "3 classes" in printed
    assert len(_images(out)) == 12 and not list(out.rglob("Thumbs.db"))
    assert tfxp_main(["data", "generate", "photos", str(out), "--images", "1"]) == 1
    assert "not empty" in capsys.readouterr().err
    assert tfxp_main(["data", "generate", "photos", str(tmp_path / "x")]) == 1
    assert "--images" in capsys.readouterr().err
    assert not list(tmp_path.glob(".*")), "the staging folder is renamed, not left behind"


def test_an_interrupted_run_publishes_nothing(tmp_path, monkeypatch):
    def interrupted(span_dir, *args, **kwargs):
        (Path(span_dir) / "circle").mkdir(parents=True)
        (Path(span_dir) / "circle" / "0000000.jpg").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(photos, "write_photos", interrupted)
    with pytest.raises(KeyboardInterrupt):
        tfxp_main(["data", "generate", "photos", str(tmp_path / "span-1"), "--images", "5"])
    assert list(tmp_path.iterdir()) == []
