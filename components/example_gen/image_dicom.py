"""DICOM files as images: pixel data at its bit depth, a few header fields, no patient identity.

A DICOM file in a class folder is ingested like a PNG or JPEG beside it, with
one conversion, since TensorFlow cannot decode DICOM: its pixel data (the
first frame of a multi-frame file) is stored as a lossless PNG at the file's
bit depth, 8 or 16 bits per sample (`format` b"png"), so the trainer and a
serving client decode it with `tf.io.decode_png` / `decode_image`.

- Signed pixels (PixelRepresentation 1, e.g. CT) are shifted by +32768 into
  the unsigned range a PNG holds; `dicom_pixel_offset` records the shift
  (stored value = DICOM value + offset), so the original values are exact.
- Colour (RGB, YBR converted to RGB by pydicom) is stored as an 8-bit RGB
  PNG; 16-bit colour has no PNG form here and is reported as a bad file.
- Compressed transfer syntaxes decode when pydicom has a decoder for them
  (RLE, and baseline JPEG through Pillow); others (12-bit JPEG, JPEG 2000,
  JPEG-LS without their plugins) are bad files, named with pydicom's reason.

Header fields kept, as features (all optional in the file; absent ones are
empty): `dicom_modality` (e.g. CT, MR), `dicom_body_part`,
`dicom_patient_sex`, `dicom_patient_age` (e.g. "045Y"), `dicom_photometric`,
`dicom_bits_stored`, `dicom_pixel_offset`; rows and columns are `height` and
`width`. Nothing else of the header is read into the Example: patient name,
id, birth date, institution, physicians and study ids are never stored.
"""

from __future__ import annotations

import io
from typing import Any

KEPT_TEXT = {
    "dicom_modality": "Modality",
    "dicom_body_part": "BodyPartExamined",
    "dicom_patient_sex": "PatientSex",
    "dicom_patient_age": "PatientAge",
    "dicom_photometric": "PhotometricInterpretation",
}
SIGNED_OFFSET = 32768


def is_dicom(data: bytes) -> bool:
    """A DICOM Part 10 file: a 128-byte preamble, then "DICM"."""
    return len(data) >= 132 and data[128:132] == b"DICM"


def _pixels(ds: Any) -> tuple[Any, int]:
    """(first frame as uint8/uint16 [H, W] or [H, W, 3], offset added to signed values)."""
    import numpy as np

    try:
        pixels = ds.pixel_array
    except Exception as e:  # noqa: BLE001 - pydicom raises ValueError, RuntimeError, NotImplementedError...
        raise ValueError(
            f"DICOM pixel data does not decode: {' '.join(str(e).split())[:300]}"
        ) from None
    if int(ds.get("NumberOfFrames", 1) or 1) > 1:
        pixels = pixels[0]
    offset = 0
    if pixels.dtype.kind == "i":
        offset = SIGNED_OFFSET if pixels.dtype.itemsize == 2 else 0
        pixels = (pixels.astype(np.int32) + offset).clip(0, 65535)
    bits = 8 if pixels.dtype.itemsize == 1 and not offset else 16
    if pixels.ndim == 3 and bits == 16:
        raise ValueError("16-bit colour DICOM pixel data has no lossless PNG form here")
    return pixels.astype(np.uint8 if bits == 8 else np.uint16), offset


def dicom_to_png(data: bytes) -> tuple[bytes, dict[str, Any]]:
    """(lossless PNG of the pixel data, the kept header fields). ValueError naming why not."""
    import pydicom
    from PIL import Image

    try:
        ds = pydicom.dcmread(io.BytesIO(data))
    except Exception as e:  # noqa: BLE001 - InvalidDicomError, struct errors on a cut header...
        raise ValueError(f"not a readable DICOM file: {e}") from None
    if "PixelData" not in ds:
        raise ValueError("DICOM file without pixel data (a report or structure set)")
    pixels, offset = _pixels(ds)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG", compress_level=6)
    fields: dict[str, Any] = {k: str(ds.get(tag, "") or "") for k, tag in KEPT_TEXT.items()}
    fields["dicom_bits_stored"] = int(ds.get("BitsStored", 8 * pixels.dtype.itemsize))
    fields["dicom_pixel_offset"] = offset
    return buf.getvalue(), fields
