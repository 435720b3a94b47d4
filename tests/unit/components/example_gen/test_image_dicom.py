"""DICOM studies through ImageExampleGen, on the sample files pydicom ships: pixel data kept
exactly at its bit depth, the kept header fields, no patient identity, broken files named."""

from __future__ import annotations

import gzip
import shutil

import numpy as np
import pydicom
import pytest
import tensorflow as tf
from pydicom.data import get_testdata_file
from test_image_example_gen import run_executor

from components.example_gen import image_example_gen as ieg
from components.example_gen.image_dicom import SIGNED_OFFSET, dicom_to_png, is_dicom

GOOD = {"ct": ["CT_small.dcm"], "mr": ["MR_small.dcm", "MR_small_RLE.dcm"]}
BAD = {"mr": ["MR_truncated.dcm", "JPEG-lossy.dcm", "SC_rgb_rle_16bit.dcm"]}


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    root = tmp_path_factory.mktemp("dicom")
    for files in (GOOD, BAD):
        for folder, names in files.items():
            (root / "span-1" / folder).mkdir(parents=True, exist_ok=True)
            for name in names:
                shutil.copyfile(get_testdata_file(name), root / "span-1" / folder / name)
    out = tmp_path_factory.mktemp("dicom-examples")
    artifact = run_executor(root, out, class_names=["ct", "mr"])
    records = []
    for shard in sorted(out.glob("Split-*/*.gz")):
        for record in tf.data.TFRecordDataset(str(shard), compression_type="GZIP"):
            records.append(tf.train.Example.FromString(record.numpy()).features.feature)
    return root / "span-1", artifact, out, records


def _text(f, key: str) -> str:
    return f[key].bytes_list.value[0].decode()


def test_pixels_are_kept_exactly_at_their_bit_depth(ingested):
    _, artifact, _, records = ingested
    assert artifact.get_int_custom_property(ieg.IMAGE_COUNT) == len(records) == 3
    by_modality = {}
    for f in records:
        assert _text(f, "format") == "png" and f["dicom_bits_stored"].int64_list.value == [16]
        png = f["image"].bytes_list.value[0]
        stored = tf.io.decode_png(png, dtype=tf.uint16).numpy()[..., 0].astype(np.int32)
        offset = f["dicom_pixel_offset"].int64_list.value[0]
        assert offset == SIGNED_OFFSET  # CT and MR samples hold signed 16-bit values
        by_modality.setdefault(_text(f, "dicom_modality"), []).append(stored - offset)
        assert (f["height"].int64_list.value[0], f["width"].int64_list.value[0]) == stored.shape
    ct = pydicom.dcmread(get_testdata_file("CT_small.dcm")).pixel_array
    np.testing.assert_array_equal(by_modality["CT"][0], ct)
    mr = pydicom.dcmread(get_testdata_file("MR_small.dcm")).pixel_array
    assert all(np.array_equal(m, mr) for m in by_modality["MR"])  # RLE decodes to the same
    formats = artifact.get_string_custom_property(ieg.IMAGE_FORMATS_SEEN)
    assert formats == '{"dicom": 3}'


def test_kept_header_fields_and_no_patient_identity(ingested):
    _, _, out, records = ingested
    ct = [f for f in records if _text(f, "dicom_modality") == "CT"][0]
    assert (_text(ct, "dicom_patient_sex"), _text(ct, "dicom_patient_age")) == ("O", "000Y")
    assert _text(ct, "dicom_photometric") == "MONOCHROME2"
    source = pydicom.dcmread(get_testdata_file("CT_small.dcm"))
    identity = [str(source.PatientName), str(source.PatientID), str(source.StudyInstanceUID)]
    assert all(identity)
    written = b""
    for shard in out.glob("Split-*/*.gz"):
        with gzip.open(shard) as f:
            written += f.read()
    for value in identity:
        assert value.encode() not in written, value
    allowed = {"image", "label", "height", "width", "channels", "format"}
    assert {k for f in records for k in f if not k.startswith("dicom_")} == allowed


def test_dicom_that_does_not_decode_is_named_with_its_reason(ingested):
    root, artifact, _, _ = ingested
    bad = dict(b.split(": ", 1) for b in ieg_bad(artifact))
    assert set(bad) == {str(root / "mr" / n) for n in BAD["mr"]}
    assert "less than expected" in bad[str(root / "mr" / "MR_truncated.dcm")]
    assert "16-bit colour" in bad[str(root / "mr" / "SC_rgb_rle_16bit.dcm")]
    assert "does not decode" in bad[str(root / "mr" / "JPEG-lossy.dcm")]


def ieg_bad(artifact) -> list[str]:
    import json

    return json.loads(artifact.get_string_custom_property(ieg.BAD_IMAGES))


def test_is_dicom_and_a_file_that_only_looks_like_one():
    with open(get_testdata_file("CT_small.dcm"), "rb") as f:
        data = f.read()
    assert is_dicom(data) and not is_dicom(data[:100]) and not is_dicom(b"\x89PNG" + bytes(200))
    with pytest.raises(ValueError, match="DICOM file without pixel data"):
        dicom_to_png(data[:140])  # the header's start only
