"""Writes a photo-like image dataset: class folders of JPEGs and PNGs a CNN can learn.

    tfxp data generate photos OUT --images N [--size 224] [--classes K] [--seed S] [--no-broken]
    python -m data.photos OUT --images N ...             (the same, without the tfxp CLI)

Each class is a shape or texture family (circle, square, triangle, stripes,
checker, ring, cross, dots, diamond, bars) drawn in the class's own hue, with
random position, scale, rotation and colour jitter on a noisy gradient
background; classes beyond ten reuse the families with other hues. Images
are about `size` on each side, at mixed sizes (0.75-1.25 x size per side,
rarely square). About 90% are JPEG (quality 90) and 10% PNG.

The same arguments give the same bytes: every image is drawn from a random
generator seeded by (seed, index), and neither format carries a timestamp
or EXIF block. Images are written one at a time (memory is flat whatever the
count); large counts are split into index ranges written by two processes.

With `broken=True` (the default) the folders also hold what real folders
hold besides good photos (see `BROKEN_KINDS`): truncated JPEGs, a zero-byte
file, a text file named `.jpg`, a CMYK JPEG, a grayscale PNG, a 16-bit PNG,
and `.DS_Store` / `Thumbs.db`. The first three are not images; the next
three are valid images in unusual layouts; the last are operating-system
files that are not images at all.
"""

from __future__ import annotations

import argparse
import colorsys
import io
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

FAMILIES = (
    "circle",
    "square",
    "triangle",
    "stripes",
    "checker",
    "ring",
    "cross",
    "dots",
    "diamond",
    "bars",
)
JPEG_QUALITY = 90
PNG_SHARE = 0.1
SIZE_JITTER = (0.75, 1.25)
# Indices per task when two processes share the work; below this many images
# one process writes everything (a process start costs more than it saves).
CHUNK = 500

# What each broken kind is, and what the image ExampleGen does with it:
# "bad" files are skipped and named in the run's report (or stop the run with
# on_bad_image: fail), "kept" ones are ingested, "ignored" ones are counted
# as non-image files and skipped without being called bad.
BROKEN_KINDS = {
    "truncated-jpeg": "bad",
    "zero-bytes": "bad",
    "not-an-image": "bad",
    "cmyk-jpeg": "kept",
    "grayscale-png": "kept",
    "16bit-png": "kept",
    "os-metadata": "ignored",
}


def class_names(classes: int) -> list[str]:
    """Folder names: the family, and for classes past the tenth its hue round (`circle-2`)."""
    names = []
    for k in range(classes):
        family = FAMILIES[k % len(FAMILIES)]
        names.append(family if k < len(FAMILIES) else f"{family}-{k // len(FAMILIES) + 1}")
    return names


def _colour(hue: float, rng: np.random.Generator) -> tuple[int, int, int]:
    h = (hue + rng.uniform(-0.03, 0.03)) % 1.0
    r, g, b = colorsys.hsv_to_rgb(h, rng.uniform(0.6, 1.0), rng.uniform(0.65, 1.0))
    return int(r * 255), int(g * 255), int(b * 255)


def _background(h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """A dim, low-saturation gradient plus grain: float32 [h, w, 3]."""
    y = np.linspace(0.0, 1.0, h, dtype=np.float32)[:, None, None]
    x = np.linspace(0.0, 1.0, w, dtype=np.float32)[None, :, None]
    angle = rng.uniform(0, 2 * np.pi)
    ramp = np.cos(angle) * x + np.sin(angle) * y
    low = rng.uniform(20, 90, 3).astype(np.float32)
    high = low + rng.uniform(-30, 60, 3).astype(np.float32)
    return low + (high - low) * ramp


def _mask(family: str, h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """Where the shape or texture is: float32 [h, w] in {0, 1}."""
    s = min(h, w)
    cy, cx = rng.uniform(0.3, 0.7) * h, rng.uniform(0.3, 0.7) * w
    r = rng.uniform(0.18, 0.34) * s
    y, x = np.ogrid[0:h, 0:w]
    dy, dx = (y - cy).astype(np.float32), (x - cx).astype(np.float32)
    t = rng.uniform(0, np.pi)  # rotation
    u, v = dx * np.cos(t) + dy * np.sin(t), -dx * np.sin(t) + dy * np.cos(t)
    period = rng.uniform(0.08, 0.16) * s
    if family == "circle":
        m = dx**2 + dy**2 <= r**2
    elif family == "square":
        m = (np.abs(u) <= r * 0.85) & (np.abs(v) <= r * 0.85)
    elif family == "triangle":
        m = (v <= r * 0.6) & (v >= 1.7 * np.abs(u) - r)
    elif family == "stripes":
        m = np.sin(2 * np.pi * u / period) > 0
    elif family == "checker":
        m = (np.floor(u / period) + np.floor(v / period)) % 2 == 0
    elif family == "ring":
        d2 = dx**2 + dy**2
        m = (d2 <= r**2) & (d2 >= (0.6 * r) ** 2)
    elif family == "cross":
        m = ((np.abs(u) <= r * 0.3) | (np.abs(v) <= r * 0.3)) & (np.maximum(abs(u), abs(v)) <= r)
    elif family == "dots":
        m = (np.mod(u, period) - period / 2) ** 2 + (np.mod(v, period) - period / 2) ** 2 <= (
            period / 4
        ) ** 2
    elif family == "diamond":
        m = np.abs(u) + np.abs(v) <= r
    else:  # bars: a few thick parallel bars across the shape's box
        m = (np.abs(v) <= r) & (np.sin(2 * np.pi * u / (period * 2.5)) > 0.3)
    return np.broadcast_to(m, (h, w)).astype(np.float32)


def photo(index: int, size: int, classes: int, seed: int = 0) -> tuple[int, np.ndarray, str]:
    """(class index, uint8 [h, w, 3] pixels, "jpeg" or "png") of image `index`."""
    rng = np.random.default_rng([seed, index])
    label = index % classes
    h, w = (max(8, round(size * rng.uniform(*SIZE_JITTER))) for _ in range(2))
    family = FAMILIES[label % len(FAMILIES)]
    hue = (label * 0.618034) % 1.0  # golden-ratio steps: neighbouring classes far apart in hue
    image = _background(h, w, rng)
    mask = _mask(family, h, w, rng)[..., None]
    image = image * (1 - mask) + np.asarray(_colour(hue, rng), np.float32) * mask
    image += rng.normal(0.0, rng.uniform(4, 14), (h, w, 1)).astype(np.float32)  # grain
    fmt = "png" if rng.random() < PNG_SHARE else "jpeg"
    return label, np.clip(image, 0, 255).astype(np.uint8), fmt


def encode(pixels: np.ndarray, fmt: str, mode: str | None = None) -> bytes:
    """JPEG (quality 90, no EXIF) or PNG bytes; the same pixels give the same bytes."""
    from PIL import Image

    img = Image.fromarray(pixels)
    if mode:
        img = img.convert(mode)
    buf = io.BytesIO()
    if fmt == "jpeg":
        img.save(buf, format="JPEG", quality=JPEG_QUALITY, optimize=False)
    else:
        img.save(buf, format="PNG", compress_level=6)
    return buf.getvalue()


def _file_name(index: int, fmt: str) -> str:
    return f"{index:07d}.{'jpg' if fmt == 'jpeg' else 'png'}"


def _write_range(span_dir: str, start: int, stop: int, size: int, classes: int, seed: int):
    """Writes images start..stop-1; returns (images per class, bytes written)."""
    names = class_names(classes)
    counts = [0] * classes
    nbytes = 0
    for i in range(start, stop):
        label, pixels, fmt = photo(i, size, classes, seed)
        data = encode(pixels, fmt)
        path = os.path.join(span_dir, names[label], _file_name(i, fmt))
        with open(path, "wb") as f:
            f.write(data)
        counts[label] += 1
        nbytes += len(data)
    return counts, nbytes


def _sixteen_bit_png(pixels: np.ndarray) -> bytes:
    from PIL import Image

    grey = pixels.mean(axis=2).astype(np.uint16) * 257  # full 16-bit range
    buf = io.BytesIO()
    Image.fromarray(grey).save(buf, format="PNG")  # mode I;16: a 16-bit greyscale PNG
    return buf.getvalue()


def broken_files(size: int, classes: int, seed: int) -> list[tuple[str, str, bytes]]:
    """(relative path, kind, bytes) of each broken or unusual file (see BROKEN_KINDS)."""
    names = class_names(classes)

    def sample(n: int) -> tuple[str, np.ndarray]:
        # Drawn like image n of the span (a class's content), with its own index range.
        label, pixels, _ = photo(10**7 + n, size, classes, seed)
        return names[label], pixels

    files = []
    for n in range(2):
        folder, pixels = sample(n)
        jpeg = encode(pixels, "jpeg")
        files.append((f"{folder}/truncated-{n}.jpg", "truncated-jpeg", jpeg[: len(jpeg) // 2]))
    files.append((f"{names[0]}/empty.jpg", "zero-bytes", b""))
    files.append((f"{names[-1]}/notes.png", "not-an-image", b"shopping list: milk, eggs\n"))
    folder, pixels = sample(2)
    files.append((f"{folder}/cmyk.jpg", "cmyk-jpeg", encode(pixels, "jpeg", mode="CMYK")))
    folder, pixels = sample(3)
    files.append((f"{folder}/grey.png", "grayscale-png", encode(pixels, "png", mode="L")))
    folder, pixels = sample(4)
    files.append((f"{folder}/sixteen-bit.png", "16bit-png", _sixteen_bit_png(pixels)))
    files.append((".DS_Store", "os-metadata", b"\x00\x00\x00\x01Bud1" + bytes(64)))
    files.append((f"{names[0]}/.DS_Store", "os-metadata", b"\x00\x00\x00\x01Bud1" + bytes(64)))
    files.append((f"{names[-1]}/Thumbs.db", "os-metadata", bytes.fromhex("d0cf11e0a1b11ae1")))
    return files


def _context():
    """Forked workers start at once; spawned ones once TensorFlow is loaded (a fork copies
    its threads' locks in whatever state they are)."""
    return mp.get_context("spawn" if "tensorflow" in sys.modules else "fork")


def _workers(images: int) -> int:
    return 1 if images < 4 * CHUNK else max(1, min(2, os.cpu_count() or 1))


def write_photos(
    span_dir: Path,
    images: int,
    *,
    size: int = 224,
    classes: int = 10,
    seed: int = 0,
    broken: bool = True,
    progress: Callable[[int, int], None] | None = None,
    workers: int = 0,
) -> dict:
    """Writes `images` photos as `span_dir/<class name>/<index>.jpg|png` (plus broken files).

    Returns {"classes": [names], "counts": {class: images}, "images": n,
    "bytes": bytes written, "broken": [{"path", "kind", "ingest"}]}; `progress`
    is called with (images written, images) as the work goes.
    """
    if images < 1 or size < 8 or classes < 2:
        raise ValueError("need --images >= 1, --size >= 8 and --classes >= 2")
    span_dir = Path(span_dir)
    names = class_names(classes)
    for name in names:
        (span_dir / name).mkdir(parents=True, exist_ok=True)
    starts = range(0, images, CHUNK)
    stops = [min(a + CHUNK, images) for a in starts]
    fixed = [[x] * len(starts) for x in (str(span_dir), size, classes, seed)]
    counts, nbytes, done = [0] * classes, 0, 0
    workers = workers or _workers(images)
    pool = ProcessPoolExecutor(workers, mp_context=_context()) if workers > 1 else None
    try:
        results = (pool.map if pool else map)(_write_range, fixed[0], starts, stops, *fixed[1:])
        for part, n in results:
            counts = [x + y for x, y in zip(counts, part, strict=True)]
            nbytes, done = nbytes + n, done + sum(part)
            if progress:
                progress(done, images)
    finally:
        if pool:
            pool.shutdown()
    listed = []
    for rel, kind, data in broken_files(size, classes, seed) if broken else []:
        (span_dir / rel).write_bytes(data)
        nbytes += len(data)
        listed.append({"path": rel, "kind": kind, "ingest": BROKEN_KINDS[kind]})
    return {
        "classes": names,
        "counts": dict(zip(names, counts, strict=True)),
        "images": images,
        "bytes": nbytes,
        "broken": listed,
    }


def progress_printer(stream=None, every: float = 2.0) -> Callable[[int, int], None]:
    """Prints `done/total images (N images/s)` at most every `every` seconds, and at the end."""
    stream = stream or sys.stdout
    started = time.perf_counter()
    last = [started]

    def show(done: int, total: int) -> None:
        now = time.perf_counter()
        if now - last[0] >= every or done == total:
            last[0] = now
            rate = done / max(now - started, 1e-9)
            print(f"  {done:,}/{total:,} images ({rate:,.0f} images/s)", file=stream, flush=True)

    return show


def add_photo_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--images", type=int, help="photos to write (besides the broken files)")
    p.add_argument("--size", type=int, default=224, help="typical side in pixels (default 224)")
    p.add_argument("--classes", type=int, default=10, help="class folders (default 10)")
    p.add_argument(
        "--broken",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="add the broken and unusual files real folders have (default: yes)",
    )


def generate_photos(args: argparse.Namespace, out: Path, stream=None) -> int:
    """The command: refuses a non-empty folder, writes, prints what it wrote."""
    stream = stream or sys.stdout
    if not args.images:
        print("ERROR: photos need --images N", file=sys.stderr)
        return 1
    if out.exists() and any(out.iterdir()):
        print(f"ERROR: {out} is not empty; choose a new span folder", file=sys.stderr)
        return 1
    started = time.perf_counter()
    try:
        done = write_photos(
            out,
            args.images,
            size=args.size,
            classes=args.classes,
            seed=args.seed,
            broken=args.broken,
            progress=progress_printer(stream),
        )
    except ValueError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    took = time.perf_counter() - started
    print(
        f"wrote {done['images']:,} photos of ~{args.size}px in {len(done['classes'])} classes "
        f"({done['bytes'] / 1e6:.1f} MB, {done['images'] / took:,.0f} images/s) into {out}/<class>/",
        file=stream,
    )
    for b in done["broken"]:
        print(f"  {b['kind']:>14}: {b['path']} (ingest: {b['ingest']})", file=stream)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m data.photos", description=__doc__.split("\n")[0])
    p.add_argument("out", help="span folder to write (e.g. data/photos/span-1)")
    add_photo_flags(p)
    p.add_argument("--seed", type=int, default=0, help="same seed, same bytes (default 0)")
    args = p.parse_args(argv)
    return generate_photos(args, Path(args.out))


if __name__ == "__main__":
    sys.exit(main())
