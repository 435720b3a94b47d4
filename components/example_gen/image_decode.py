"""One image file -> its checked shape and format, and the tf.train.Example stored for it.

The Example (deterministic bytes) of one image:

  image     bytes   the file's encoded bytes, as they are (PNG/JPEG/GIF/BMP,
                    what TensorFlow's decode_image reads), or with
                    image_format="raw" the decoded uint8 pixels, row-major
                    [height, width, channels]
  label     int64   index of the file's folder name in `class_names`
  height, width, channels   int64: what decode_image(channels=0) returns
  format    bytes   b"jpeg", b"png", b"gif" or b"bmp"

Unusual but valid images are stored as they are and described by `channels`:
grayscale (channels 1), grey+alpha (2), RGBA (4), CMYK JPEGs (3: TensorFlow
and Pillow both convert them to RGB), 16-bit PNGs (1 or 3: decode_image
reads them as 8 bits), palette images (3, or 4 with transparency). The
transform graph then converts every image to the model's channels.
"""

from __future__ import annotations

import bisect
import hashlib
import io
from typing import Any

IMAGE_KEY = "image"
LABEL_KEY = "label"
HEIGHT_KEY = "height"
WIDTH_KEY = "width"
CHANNELS_KEY = "channels"
FORMAT_KEY = "format"

# What TensorFlow's decode_image reads; anything else could not be decoded in
# the transform graph or at serving time.
DECODABLE = {"PNG", "JPEG", "GIF", "BMP"}

# The mode a decoded image is converted to before its pixels are stored, and
# so its channel count: grey for bit/integer/float modes, RGB(A) for palettes,
# RGB for anything else (CMYK, YCbCr, ...).
_GREY_MODES = ("1", "I", "I;16", "F")
_KEPT_MODES = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}


def split_of(data: bytes, cumulative_buckets: list[int]) -> int:
    """Output split index from a SHA-256 of the image bytes (TFX's bucket arithmetic)."""
    bucket = int(hashlib.sha256(data).hexdigest(), 16) % cumulative_buckets[-1]
    return bisect.bisect(cumulative_buckets, bucket)


def _target_mode(img: Any) -> str:
    if img.mode in _GREY_MODES:
        return "L"
    if img.mode == "P":
        return "RGBA" if "transparency" in img.info else "RGB"
    return img.mode if img.mode in _KEPT_MODES else "RGB"


def _decode(data: bytes, with_pixels: bool) -> tuple[Any, tuple[int, int, int], str]:
    """(pixels or None, (height, width, channels), format); ValueError naming why it failed."""
    import numpy as np
    from PIL import Image, UnidentifiedImageError

    if not data:
        raise ValueError("empty file (0 bytes)")
    pixels = None
    try:
        with Image.open(io.BytesIO(data)) as img:
            fmt = img.format or "?"
            if fmt not in DECODABLE:
                raise ValueError(f"{fmt} is not a format TensorFlow decodes (PNG, JPEG, GIF, BMP)")
            # The pixel data itself: truncated or corrupt files fail here. Pillow
            # decodes without the GIL, so threads decode images in parallel.
            img.load()
            mode = _target_mode(img)
            width, height = img.size
            if with_pixels and img.mode.startswith("I;16"):
                # decode_image reads 16-bit samples as their high byte; Pillow's
                # convert("L") would clip them at 255 instead.
                pixels = (np.asarray(img, dtype=np.uint16) >> 8).astype(np.uint8)
            elif with_pixels:
                pixels = np.asarray(img if img.mode == mode else img.convert(mode), dtype=np.uint8)
    except UnidentifiedImageError:
        raise ValueError("not an image file (no known image header)") from None
    except (OSError, SyntaxError, Image.DecompressionBombError) as e:
        raise ValueError(str(e) or type(e).__name__) from None
    if min(height, width) == 0:
        raise ValueError(f"empty image ({height}x{width})")
    if pixels is not None and pixels.ndim == 2:
        pixels = pixels[..., None]
    return pixels, (height, width, _KEPT_MODES[mode]), fmt.lower()


def decode(data: bytes) -> tuple[Any, str]:
    """(pixels as a uint8 [H, W, C] array, format). Raises ValueError naming why it failed."""
    pixels, _, fmt = _decode(data, with_pixels=True)
    return pixels, fmt


def probe(data: bytes) -> tuple[tuple[int, int, int], str]:
    """((height, width, channels), format) of an image `decode` accepts, checked the same
    way (every pixel decoded), without converting or copying the pixels."""
    _, shape, fmt = _decode(data, with_pixels=False)
    return shape, fmt


def image_example(
    data: bytes,
    pixels: Any,
    label: int,
    image_format: str = "encoded",
    fmt: str = "",
    extra: dict[str, str | int] | None = None,
) -> bytes:
    """A serialized tf.train.Example for one image (deterministic bytes).

    With image_format "encoded", `pixels` may be the (height, width, channels)
    shape alone (from `probe`): only the file's bytes are stored. `fmt` is the
    file's format ("jpeg", "png", ...), stored as `format`; `extra` adds
    features (text as bytes, integers as int64), e.g. DICOM header fields.
    """
    import tensorflow as tf

    height, width, channels = pixels if isinstance(pixels, tuple) else pixels.shape
    image = data if image_format == "encoded" else pixels.tobytes()

    def ints(v: int) -> tf.train.Feature:
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v)]))

    def blob(v: bytes) -> tf.train.Feature:
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

    example = tf.train.Example(
        features=tf.train.Features(
            feature={
                IMAGE_KEY: blob(image),
                LABEL_KEY: ints(label),
                HEIGHT_KEY: ints(height),
                WIDTH_KEY: ints(width),
                CHANNELS_KEY: ints(channels),
                FORMAT_KEY: blob(fmt.encode()),
                **{
                    k: ints(v) if isinstance(v, int) else blob(str(v).encode())
                    for k, v in (extra or {}).items()
                },
            }
        )
    )
    return example.SerializeToString(deterministic=True)
