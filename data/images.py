"""Writes image datasets as class folders of PNG files: `span-<N>/<label>/*.png`.

    python -m data.images digits [OUT_DIR]          scikit-learn's 1,797 8x8 digits
    python -m data.images synthetic OUT_DIR --count 10000 [--size 224] [--seed 0]

`digits` makes the embedded default, `data/digits/span-1/` (committed; the
same bytes every time, so the content fingerprint of span 1 never changes).
scikit-learn stores each pixel as an ink level 0-16; it is written as the
8-bit grey value round(v * 255 / 16), so the model sees 0-1 after /255.

`synthetic` writes COUNT images of SIZE x SIZE RGB for scale tests and
benchmarks, streamed one by one (memory is flat whatever the count) into
`--classes` folders. Each image is a smooth colour gradient plus noise (a
realistic PNG compression ratio, unlike pure noise or flat colour), seeded by
(seed, index): the same arguments give the same bytes.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DIGITS_ROOT = PROJECT_ROOT / "data" / "digits"


def encode_png(pixels: np.ndarray) -> bytes:
    """PNG bytes of a uint8 [H, W] (grey) or [H, W, 3|4] array; deterministic (no timestamps)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG", optimize=False, compress_level=6)
    return buf.getvalue()


def digits_pixels() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits as uint8 [n, 8, 8] grey images (0-255) and int labels."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    pixels = np.rint(digits.images * (255.0 / 16.0)).astype(np.uint8)
    return pixels, digits.target.astype(np.int64)


def write_digits(span_dir: Path) -> int:
    """Writes every digit as `<span_dir>/<label>/<index:04d>.png`; returns the count."""
    pixels, labels = digits_pixels()
    for i, (image, label) in enumerate(zip(pixels, labels, strict=True)):
        folder = span_dir / str(int(label))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:04d}.png").write_bytes(encode_png(image))
    return len(labels)


def synthetic_image(index: int, size: int, seed: int = 0) -> np.ndarray:
    """A size x size RGB uint8 image: a random-direction colour gradient plus noise."""
    rng = np.random.default_rng([seed, index])
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / max(1, size - 1)
    angle = rng.uniform(0, 2 * np.pi)
    ramp = np.cos(angle) * x + np.sin(angle) * y
    low, high = rng.uniform(0, 255, size=(2, 3)).astype(np.float32)
    image = low + (high - low) * ramp[..., None]
    image += rng.normal(0, 12, size=image.shape).astype(np.float32)
    return np.clip(image, 0, 255).astype(np.uint8)


def write_synthetic(
    out_dir: Path,
    count: int,
    *,
    size: int = 224,
    classes: int = 10,
    seed: int = 0,
    progress=None,
) -> int:
    """Writes `count` PNGs as `<out_dir>/<index % classes>/<index:07d>.png`; returns bytes written."""
    total = 0
    for c in range(classes):
        (out_dir / str(c)).mkdir(parents=True, exist_ok=True)
    for i in range(count):
        data = encode_png(synthetic_image(i, size, seed))
        (out_dir / str(i % classes) / f"{i:07d}.png").write_bytes(data)
        total += len(data)
        if progress and (i + 1) % 1000 == 0:
            progress(i + 1, total)
    return total


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data.images", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    dig = sub.add_parser("digits", help="scikit-learn's digits as PNG class folders")
    dig.add_argument(
        "out", nargs="?", default=str(DIGITS_ROOT / "span-1"), help="span folder to write"
    )
    syn = sub.add_parser("synthetic", help="N synthetic RGB images as PNG class folders")
    syn.add_argument("out", help="span folder to write (e.g. /tmp/images/span-1)")
    syn.add_argument("--count", type=int, required=True)
    syn.add_argument("--size", type=int, default=224, help="height and width in pixels")
    syn.add_argument("--classes", type=int, default=10)
    syn.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        print(f"ERROR: {out} is not empty; choose a new span folder", file=sys.stderr)
        return 1
    start = time.perf_counter()
    if args.command == "digits":
        n = write_digits(out)
        print(f"wrote {n} digit PNGs into {out}/<label>/ in {time.perf_counter() - start:.1f}s")
        return 0
    if args.count < 1 or args.size < 1 or args.classes < 1:
        print("ERROR: --count, --size and --classes must be at least 1", file=sys.stderr)
        return 1

    def progress(done: int, nbytes: int) -> None:
        rate = done / (time.perf_counter() - start)
        print(f"  {done:,}/{args.count:,} images, {nbytes / 1e6:.0f} MB ({rate:.0f} images/s)")

    nbytes = write_synthetic(
        out, args.count, size=args.size, classes=args.classes, seed=args.seed, progress=progress
    )
    print(
        f"wrote {args.count:,} {args.size}x{args.size} RGB PNGs ({nbytes / 1e6:.1f} MB) into "
        f"{out}/<label>/ in {time.perf_counter() - start:.1f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
