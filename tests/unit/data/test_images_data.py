"""data/images.py: the committed digits are what the generator writes; synthetic images stream."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from data import images

COMMITTED = images.DIGITS_ROOT / "span-1"


def test_committed_digits_match_scikit_learn():
    pixels, labels = images.digits_pixels()
    files = sorted(COMMITTED.glob("*/*.png"))
    assert len(files) == len(labels) == 1797
    for i in (0, 1, 500, 1796):
        path = COMMITTED / str(labels[i]) / f"{i:04d}.png"
        np.testing.assert_array_equal(np.asarray(Image.open(path)), pixels[i])
    assert pixels.max() == 255 and pixels.min() == 0
    on_disk = {int(p.name): len(list(p.glob("*.png"))) for p in COMMITTED.iterdir()}
    assert on_disk == {d: int((labels == d).sum()) for d in range(10)}


def test_digits_are_byte_identical_when_rewritten(tmp_path):
    assert images.main(["digits", str(tmp_path / "span-1")]) == 0
    for path in sorted(COMMITTED.glob("*/*.png"))[::97]:
        assert (tmp_path / "span-1" / path.relative_to(COMMITTED)).read_bytes() == path.read_bytes()


def test_synthetic_images(tmp_path: Path):
    assert images.main(["synthetic", str(tmp_path / "a"), "--count", "7", "--size", "32"]) == 0
    files = sorted((tmp_path / "a").glob("*/*.png"))
    assert len(files) == 7 and {f.parent.name for f in files} == {str(i) for i in range(7)}
    image = np.asarray(Image.open(files[0]))
    assert image.shape == (32, 32, 3) and image.dtype == np.uint8 and image.std() > 5
    images.main(["synthetic", str(tmp_path / "b"), "--count", "7", "--size", "32"])
    assert all(
        f.read_bytes() == (tmp_path / "b" / f.relative_to(tmp_path / "a")).read_bytes()
        for f in files
    )


def test_refuses_a_non_empty_folder(tmp_path, capsys):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("")
    assert images.main(["synthetic", str(tmp_path / "x"), "--count", "1"]) == 1
    assert "not empty" in capsys.readouterr().err
