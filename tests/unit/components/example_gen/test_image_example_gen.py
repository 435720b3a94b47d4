"""ImageExampleGen's executor on small folders: splits, class counts, pixels, bad files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import any_pb2, struct_pb2
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.utils import proto_utils

from components.example_gen import image_decode, image_listing, image_shards
from components.example_gen import image_example_gen as ieg
from data.images import encode_png

CLASSES = ["cat", "dog", "owl"]
PER_CLASS = {"cat": 30, "dog": 20, "owl": 10}


def _image(i: int, channels: int) -> np.ndarray:
    rng = np.random.default_rng(i)
    shape = (5 + i % 4, 7 + i % 3) + ((channels,) if channels > 1 else ())
    return rng.integers(0, 256, size=shape, dtype=np.uint8)


def write_folder(root: Path) -> dict[str, np.ndarray]:
    """span-1/<class>/*.png with distinct random images: grey, RGB and RGBA mixed."""
    written = {}
    i = 0
    for name, n in PER_CLASS.items():
        folder = root / "span-1" / name
        folder.mkdir(parents=True)
        for _ in range(n):
            pixels = _image(i, channels=(1, 3, 4)[i % 3])
            path = folder / f"{i:03d}.png"
            path.write_bytes(encode_png(pixels))
            written[str(path)] = pixels if pixels.ndim == 3 else pixels[..., None]
            i += 1
    return written


def run_executor(root: Path, out: Path, **options) -> standard_artifacts.Examples:
    config = {"class_names": CLASSES, "num_shards": 0, **options}
    struct = struct_pb2.Struct()
    struct.update(config)
    packed = any_pb2.Any()
    packed.Pack(struct)
    examples = standard_artifacts.Examples()
    examples.uri = str(out)
    props = {
        standard_component_specs.INPUT_BASE_KEY: str(root),
        standard_component_specs.INPUT_CONFIG_KEY: proto_utils.proto_to_json(
            example_gen_pb2.Input(
                splits=[example_gen_pb2.Input.Split(name="single_split", pattern="span-1/*/*")]
            )
        ),
        standard_component_specs.OUTPUT_CONFIG_KEY: proto_utils.proto_to_json(
            example_gen_pb2.Output(
                split_config=example_gen_pb2.SplitConfig(
                    splits=[
                        example_gen_pb2.SplitConfig.Split(name="train", hash_buckets=2),
                        example_gen_pb2.SplitConfig.Split(name="eval", hash_buckets=1),
                    ]
                )
            )
        ),
        standard_component_specs.CUSTOM_CONFIG_KEY: proto_utils.proto_to_json(
            example_gen_pb2.CustomConfig(custom_config=packed)
        ),
    }
    ieg.Executor().Do({}, {standard_component_specs.EXAMPLES_KEY: [examples]}, props)
    return examples


def read_split(out: Path, split: str) -> list[dict]:
    files = sorted(str(p) for p in (out / f"Split-{split}").glob("*.gz"))
    assert files, f"no shards in Split-{split}"
    rows = []
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP"):
        f = tf.train.Example.FromString(record.numpy()).features.feature
        rows.append(
            {
                "image": f["image"].bytes_list.value[0],
                **{k: f[k].int64_list.value[0] for k in ("label", "height", "width", "channels")},
                "format": f["format"].bytes_list.value[0],
            }
        )
    return rows


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    root = tmp_path_factory.mktemp("images")
    return root, write_folder(root)


@pytest.fixture(scope="module")
def encoded(folder, tmp_path_factory):
    root, _ = folder
    out = tmp_path_factory.mktemp("encoded")
    return run_executor(root, out), out


def test_counts_per_split_and_class(folder, encoded):
    _, written = folder
    artifact, out = encoded
    rows = {s: read_split(out, s) for s in ("train", "eval")}
    assert sum(len(r) for r in rows.values()) == len(written) == 60
    recorded = json.loads(artifact.get_string_custom_property(ieg.CLASS_COUNTS))
    for split, examples in rows.items():
        actual = {}
        for e in examples:
            name = CLASSES[e["label"]]
            actual[name] = actual.get(name, 0) + 1
        assert recorded[split] == actual
    for name, n in PER_CLASS.items():
        assert recorded["train"].get(name, 0) + recorded["eval"].get(name, 0) == n
    assert artifact.get_int_custom_property(ieg.IMAGE_COUNT) == 60
    assert artifact.get_int_custom_property(ieg.SKIPPED_IMAGES) == 0
    # A 2:1 hash split of 60 distinct images: roughly 40/20, never all in one.
    assert 25 <= len(rows["train"]) <= 52
    assert artifact.split_names == '["train", "eval"]'


def test_split_is_decided_by_image_content(folder, encoded):
    _, written = folder
    _, out = encoded
    by_split = {s: {e["image"] for e in read_split(out, s)} for s in ("train", "eval")}
    for path in written:
        data = Path(path).read_bytes()
        expected = ("train", "eval")[image_decode.split_of(data, [2, 3])]
        assert data in by_split[expected], path


def test_encoded_pixels_round_trip_exactly(folder, encoded):
    _, written = folder
    _, out = encoded
    by_bytes = {Path(p).read_bytes(): pixels for p, pixels in written.items()}
    for split in ("train", "eval"):
        for e in read_split(out, split):
            original = by_bytes[e["image"]]  # the file's bytes, unchanged
            decoded = tf.io.decode_png(e["image"]).numpy()
            np.testing.assert_array_equal(decoded, original)
            assert (e["height"], e["width"], e["channels"]) == original.shape


def test_raw_pixels_round_trip_exactly(folder, tmp_path):
    root, written = folder
    run_executor(root, tmp_path, image_format="raw")
    originals = list(written.values())
    seen = 0
    for split in ("train", "eval"):
        for e in read_split(tmp_path, split):
            shape = (e["height"], e["width"], e["channels"])
            pixels = np.frombuffer(e["image"], dtype=np.uint8).reshape(shape)
            assert any(o.shape == shape and np.array_equal(o, pixels) for o in originals)
            seen += 1
    assert seen == len(written)


def _with_corrupt(tmp_path: Path, folder) -> tuple[Path, Path]:
    root, written = folder
    copy = tmp_path / "data"
    for path in written:
        dest = copy / Path(path).relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(Path(path).read_bytes())
    good = Path(next(iter(written)))
    (copy / "span-1" / "dog" / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")  # hidden: not data
    bad = copy / "span-1" / "dog" / "broken.png"
    bad.write_bytes(good.read_bytes()[:40])  # a truncated PNG
    (copy / "span-1" / "owl" / "notes.png").write_text("not an image")
    return copy, bad


def test_corrupt_image_fails_with_its_path(folder, tmp_path):
    data, bad = _with_corrupt(tmp_path, folder)
    out = tmp_path / "out"
    with pytest.raises(image_listing.ImageInputError) as e:
        run_executor(data, out, on_bad_image="fail")
    message = str(e.value)
    assert str(bad) in message
    assert str(data / "span-1" / "owl" / "notes.png") in message
    assert "2 image file(s)" in message and "on_bad_image: skip" in message
    assert not list(out.glob("Split-*")), "no half-written splits are left behind"


def test_corrupt_image_skipped_and_counted(folder, tmp_path):
    data, _ = _with_corrupt(tmp_path, folder)
    artifact = run_executor(data, tmp_path / "out")  # skip: the default
    assert artifact.get_int_custom_property(ieg.SKIPPED_IMAGES) == 2
    assert artifact.get_int_custom_property(ieg.IGNORED_FILES) == 1  # .DS_Store: not "bad"
    named = json.loads(artifact.get_string_custom_property(ieg.BAD_IMAGES))
    assert [n.split(": ")[0] for n in named] == sorted(
        str(data / "span-1" / c) for c in ("dog/broken.png", "owl/notes.png")
    )
    assert "not an image file" in named[1]
    assert artifact.get_int_custom_property(ieg.IMAGE_COUNT) == 60
    rows = read_split(tmp_path / "out", "train") + read_split(tmp_path / "out", "eval")
    assert len(rows) == 60
    report = json.loads((tmp_path / "out" / ieg.REPORT_FILE).read_text())
    assert len(report["bad"]) == 2 and "broken.png" in " ".join(report["bad"])
    assert report["ignored"] == [str(data / "span-1" / "dog" / ".DS_Store")]
    assert report["formats"] == {"png": 60} and report["images_per_second"] > 0


def test_unknown_class_folder_is_named(folder, tmp_path):
    data, _ = _with_corrupt(tmp_path, folder)
    (data / "span-1" / "emu").mkdir()
    (data / "span-1" / "emu" / "x.png").write_bytes(encode_png(_image(0, 3)))
    with pytest.raises(image_listing.ImageInputError, match="folder 'emu' is not a class"):
        run_executor(data, tmp_path / "out")


def test_shards_are_cut_by_bytes():
    mb = 1024 * 1024
    assert image_shards.shards_for(10 * mb, workers=2) == 1  # under 16 MB: one shard
    assert image_shards.shards_for(100 * mb, workers=2) == 6  # no shard under 16 MB
    assert image_shards.shards_for(1000 * mb, workers=2) == 20  # at least 10 per worker
    assert image_shards.shards_for(10_000 * mb, workers=2) == 79  # ~128 MB each
    assert image_shards.shards_for(10_000 * mb, workers=2, shard_mb=500) == 20
    assert image_shards.shards_for(1e9, configured=3) == 3


def test_gzip_level_follows_compressibility(encoded):
    noise = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    png = encode_png(noise)
    assert (
        image_shards.gzip_level(image_decode.image_example(png, noise, 0, "encoded")) == 0
    )  # incompressible
    flat = np.full((64, 64, 3), 7, np.uint8)
    assert (
        image_shards.gzip_level(image_decode.image_example(encode_png(flat), flat, 0, "raw")) == 1
    )
    # The test folder's images are tiny: their records' protobuf framing compresses.
    artifact, _ = encoded
    assert artifact.get_int_custom_property(ieg.GZIP_LEVEL) == 1
    # Stored or deflated, shards are GZIP files every reader opens.
    shards = list(Path(artifact.uri).glob("Split-*/*.gz"))
    assert shards and all(s.read_bytes()[:2] == b"\x1f\x8b" for s in shards)


def test_configured_gzip_level(folder, tmp_path):
    root, written = folder
    artifact = run_executor(root, tmp_path, image_format="raw", gzip_level=0)
    assert artifact.get_int_custom_property(ieg.GZIP_LEVEL) == 0
    assert len(read_split(tmp_path, "train") + read_split(tmp_path, "eval")) == len(written)


def test_component_rejects_bad_options():
    with pytest.raises(ValueError, match="on_bad_image"):
        ieg.image_example_gen("/data", ["a"], on_bad_image="ignore")
    with pytest.raises(ValueError, match="shard_mb"):
        ieg.image_example_gen("/data", ["a"], shard_mb=0)
    with pytest.raises(ValueError, match="gzip_level"):
        ieg.image_example_gen("/data", ["a"], gzip_level=10)
    with pytest.raises(ValueError, match="image_format"):
        ieg.image_example_gen("/data", ["a"], image_format="jpeg")


def _pil_bytes(mode: str, fmt: str = "PNG", **save) -> bytes:
    import io

    from PIL import Image

    img = Image.new(mode, (6, 4))
    if mode == "P":
        img.putpalette([v for i in range(256) for v in (i, 255 - i, i // 2)])
    buf = io.BytesIO()
    img.save(buf, format=fmt, **save)
    return buf.getvalue()


@pytest.mark.parametrize(
    "data",
    [
        _pil_bytes("L"),
        _pil_bytes("LA"),
        _pil_bytes("RGB"),
        _pil_bytes("RGBA"),
        _pil_bytes("1"),
        _pil_bytes("I;16"),
        _pil_bytes("P"),
        _pil_bytes("P", transparency=0),
        _pil_bytes("CMYK", "JPEG"),
        _pil_bytes("RGB", "BMP"),
    ],
    ids=["L", "LA", "RGB", "RGBA", "1", "I16", "P", "P-transparent", "CMYK-JPEG", "BMP"],
)
def test_probe_gives_the_shape_decode_gives(data):
    pixels, fmt = image_decode.decode(data)
    assert image_decode.probe(data) == (pixels.shape, fmt)
    assert image_decode.image_example(data, pixels.shape, 3) == image_decode.image_example(
        data, pixels, 3
    )


_NOISE = encode_png(np.random.default_rng(0).integers(0, 256, (20, 20, 3), dtype=np.uint8))


@pytest.mark.parametrize(
    "data", [b"not an image", _NOISE[: len(_NOISE) // 2]], ids=["text", "truncated"]
)
def test_probe_rejects_what_decode_rejects(data):
    with pytest.raises(ValueError) as decoded:
        image_decode.decode(data)
    with pytest.raises(ValueError) as probed:
        image_decode.probe(data)
    assert str(probed.value) == str(decoded.value)


@pytest.mark.parametrize("image_format", ["encoded", "raw"])
def test_decode_threads_write_what_one_thread_writes(folder, tmp_path, image_format):
    # The writer's thread pool must not change a byte: same records, same order,
    # same counts, bad files reported in input order.
    data, bad = _with_corrupt(tmp_path, folder)
    files = sorted(p for p in data.glob("span-1/*/*") if not p.name.startswith("."))
    items = [(str(p), CLASSES.index(p.parent.name)) for p in files]
    outputs = {}
    for threads in (1, 3):
        uris = [str(tmp_path / f"t{threads}" / s) for s in ("train", "eval")]
        writer = image_shards.WriteShard(image_format, [2, 3], uris, 1, 1, threads=threads)
        [result] = list(writer.process((0, items)))
        assert result.pop("seconds") >= 0  # the one thing that may differ
        shards = [sorted(Path(u).iterdir()) for u in uris]
        outputs[threads] = (result, [[f.name, f.read_bytes()] for s in shards for f in s])
    assert outputs[3] == outputs[1]
    result, written = outputs[3]
    assert sorted(b.split(": ")[0] for b in result["bad"]) == sorted(
        [str(bad), str(data / "span-1" / "owl" / "notes.png")]
    )
    assert sum(n for _, n in result["counts"]) == 60
    assert all(not name.endswith(image_shards.INCOMPLETE) for name, _ in written)
