"""The image pipeline end to end: the embedded digits, then a folder of own images as span 2.

One module fixture runs the digits config (as `tfxp run --dataset digits` does,
with its run dir and data copied under tmp), then adds span 2, a folder of
"own" images (24x24 RGB, a different size and colour layout than the 8x8 grey
digits), and runs again. Every test asserts on those two runs, and on a third
run, stopped at the validation gate, of a span 3 in which one class dominates.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.example_gen import image_example_gen as ieg
from data.images import encode_png
from metadata.summary import RunSummary
from pipeline import node_ids
from pipeline.config import PROJECT_ROOT, PipelineConfig
from pipeline.datasets import DATASETS

# The first test of a module also pays for its module fixture's whole runs.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

DIGITS = PROJECT_ROOT / "data" / "digits" / "span-1"
OWN_IMAGES_EVERY = 2  # span 2 holds every other digit, redrawn as 24x24 RGB
DOMINANT = "1"  # span 3: all of span 2's ones, a tenth of each other class


@dataclass
class ImageRuns:
    config: PipelineConfig
    first: RunSummary
    own: RunSummary
    own_files: list[Path]
    imbalanced: Exception  # span 3, blocked by the gate


def _own_images(span: Path) -> list[Path]:
    """Own photos of digits, as a user might add them: bigger, RGB, in class folders."""
    from PIL import Image

    written = []
    for path in sorted(DIGITS.glob("*/*.png"))[::OWN_IMAGES_EVERY]:
        grey = np.asarray(Image.open(path))
        big = np.kron(grey, np.ones((3, 3), dtype=np.uint8))  # 24x24, each pixel 3x3
        rgb = np.stack([big, big, (big * 0.8).astype(np.uint8)], axis=-1)
        out = span / path.parent.name / f"own-{path.stem}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(encode_png(rgb))
        written.append(out)
    return written


@pytest.fixture(scope="module")
def image_runs(tmp_path_factory) -> ImageRuns:
    from tfxp.local.runner import ValidationBlockedError, run_local

    tmp = tmp_path_factory.mktemp("digits")
    shutil.copytree(DIGITS, tmp / "data" / "span-1")
    config = DATASETS["digits"].replace(data_root=str(tmp / "data"), run_dir=str(tmp / "run"))
    first = run_local(config, run_id="span1", printer=lambda _: None)
    own_files = _own_images(tmp / "data" / "span-2")
    own = run_local(config, run_id="span2", printer=lambda _: None)
    _imbalanced_span(own_files, tmp / "data" / "span-3")
    with pytest.raises(ValidationBlockedError) as blocked:
        # Stopped at the gate: nothing after it would run anyway.
        run_local(
            config, run_id="span3", to_nodes=[node_ids.VALIDATION_GATE], printer=lambda _: None
        )
    return ImageRuns(config, first, own, own_files, blocked.value)


def _imbalanced_span(own_files: list[Path], span: Path) -> None:
    """Span 2's images again, but one class makes up about half of them."""
    by_class: dict[str, list[Path]] = {}
    for f in own_files:
        by_class.setdefault(f.parent.name, []).append(f)
    for name, files in by_class.items():
        for f in files if name == DOMINANT else files[::10]:
            (span / name).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, span / name / f.name)


def _states(summary: RunSummary) -> dict[str, str]:
    return {c.node_id: c.state for c in summary.components}


def _ingested(config: PipelineConfig) -> list[metadata_store_pb2.Artifact]:
    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = config.metadata_path
    store = metadata_store.MetadataStore(cfg)
    ingested = [  # ImageExampleGen's, not Transform's (also of type Examples)
        a for a in store.get_artifacts_by_type("Examples") if ieg.IMAGE_COUNT in a.custom_properties
    ]
    return sorted(ingested, key=lambda a: a.id)


def test_digits_default_blesses_and_pushes(image_runs):
    s = image_runs.first
    states = _states(s)
    for node in (
        node_ids.IMAGE_EXAMPLE_GEN,
        node_ids.STATISTICS_GEN,
        node_ids.TRANSFORM,
        node_ids.TRAINER,
        node_ids.EVALUATOR,
    ):
        assert states.get(node) == "COMPLETE", (node, states)
    assert s.metrics["sparse_categorical_accuracy"] > 0.9
    assert s.metrics["example_count"] > 400  # the eval split: about a third of 1,797
    assert s.blessed is True and s.pushed is True
    assert (Path(s.pushed_model) / "saved_model.pb").is_file()


def test_digits_are_evaluated_per_digit(image_runs):
    """The dataset file slices by label: every digit has its own accuracy, error rates and
    count in the first run's evaluation, and the pushed model's card shows them."""
    from components.evaluation.slicing.evaluator import SLICES_FILE

    found = sorted(
        Path(image_runs.config.pipeline_root).glob(f"Evaluator/evaluation/*/{SLICES_FILE}"),
        key=lambda p: int(p.parent.name),
    )
    assert found, "no slices.json written by the Evaluator"
    metrics = json.loads(found[0].read_text())["metrics"]
    digits = {f"label={n}" for n in range(10)}
    assert digits <= set(metrics), sorted(metrics)
    for name in digits:
        [values] = metrics[name].values()  # no baseline in the first run: the candidate only
        assert values["example_count"] > 0, name
        assert 0.0 <= values["sparse_categorical_accuracy"] <= 1.0, name
        # Each digit's error rates, one pair per class (one-vs-rest), as Fairness Indicators.
        assert {f"fall_out[class {n}]" for n in range(10)} <= set(values), (name, sorted(values))
        assert {f"miss_rate[class {n}]" for n in range(10)} <= set(values), (name, sorted(values))
    # The per-digit counts add up to the whole eval split.
    total = sum(metrics[name][next(iter(metrics[name]))]["example_count"] for name in digits)
    assert total == image_runs.first.metrics["example_count"]
    card = (Path(image_runs.first.pushed_model) / "model_card.html").read_text()
    assert "label=7" in card


def test_ingest_records_class_counts(image_runs):
    span1 = _ingested(image_runs.config)[0]
    props = span1.custom_properties
    assert props["span"].int_value == 1
    assert props[ieg.IMAGE_COUNT].int_value == 1797
    counts = json.loads(props[ieg.CLASS_COUNTS].string_value)
    per_class = {c: counts["train"].get(c, 0) + counts["eval"].get(c, 0) for c in counts["train"]}
    on_disk = {p.name: len(list(p.glob("*.png"))) for p in DIGITS.iterdir()}
    assert per_class == on_disk


def _tfxp_json(*argv: str):
    import contextlib
    import io

    from tfxp.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--json"]) == 0
    return json.loads(out.getvalue())


def test_span_lineage_of_digits_reaches_each_spans_model(image_runs):
    """ImageExampleGen's spans are found like CsvExampleGen's (lineage, runs list, data list)."""
    run_dir = ["--run-dir", image_runs.config.run_dir]
    for span, run in ((1, image_runs.first), (2, image_runs.own)):
        result = _tfxp_json("lineage", "data", "digits", str(span), *run_dir)
        assert [v["span"] for v in result["data"]] == [span]
        (use,) = result["models"]
        assert use["spans"] == [span] and use["trained_in_run"] == run.run_id
        # The same verdicts as the run's own summary (span 2's small model may not bless).
        assert (use["blessed"], use["pushed"]) == (run.blessed, run.pushed)
    listed = {
        r["run_id"]: r["spans"]
        for r in _tfxp_json("runs", "list", "--dataset", "digits", *run_dir)["runs"]
    }
    assert listed["span1"] == [1] and listed["span2"] == [2]


def _classify(model_dir: str, files: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    import tensorflow as tf

    model = tf.saved_model.load(model_dir)
    serve = model.signatures["serving_default"]
    out = serve(image_bytes=tf.constant([f.read_bytes() for f in files]))
    return out["class"].numpy(), out["probabilities"].numpy()


def test_pushed_model_classifies_png_bytes(image_runs):
    files = sorted(DIGITS.glob("*/*.png"))[::20]  # 90 files across all classes
    classes, probs = _classify(image_runs.first.pushed_model, files)
    labels = np.array([int(f.parent.name) for f in files])
    assert probs.shape == (len(files), 10)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-4)
    np.testing.assert_array_equal(classes, probs.argmax(axis=1))
    assert (classes == labels).mean() > 0.9


def test_own_images_as_a_new_span(image_runs):
    s = image_runs.own
    states = _states(s)
    for node in (
        node_ids.IMAGE_EXAMPLE_GEN,
        node_ids.TRANSFORM,
        node_ids.TRAINER,
        node_ids.EVALUATOR,
    ):
        assert states.get(node) == "COMPLETE", (node, states)
    # The blocked span-3 run ingested after it: pick span 2's ingestion by its span.
    spans = [a.custom_properties["span"].int_value for a in _ingested(image_runs.config)]
    assert spans == [1, 2, 3]
    span2 = _ingested(image_runs.config)[1]
    assert span2.custom_properties[ieg.IMAGE_COUNT].int_value == len(image_runs.own_files)
    # Judged on the new span's eval split (270 images), against the model blessed on
    # span 1. The span-2 model's accuracy there varies from run to run (TF's kernels
    # schedule threads differently): 0.900 in one CI run, 0.952-0.974 in four here, so a
    # bar at 0.9 failed now and then. 0.85 keeps the claim (a useful model on images
    # unlike span 1's; chance is 0.1) below that spread; the served-model test below
    # checks the decoding and resizing of such images directly.
    assert s.metrics["sparse_categorical_accuracy"] > 0.85
    assert s.blessed is not None


def test_served_model_resizes_own_images(image_runs):
    # The span-1 model never saw a 24x24 RGB image: serving decodes, converts
    # and resizes them in the transform graph, as training did.
    files = image_runs.own_files[::10]
    classes, _ = _classify(image_runs.first.pushed_model, files)
    labels = np.array([int(f.parent.name) for f in files])
    assert (classes == labels).mean() > 0.85


def _gate_findings(config: PipelineConfig, run_id: str) -> dict:
    return json.loads((Path(config.report_dir) / f"{run_id}.json").read_text())


def test_gate_passes_digits_and_says_skew_is_not_checked(image_runs):
    assert _states(image_runs.first)[node_ids.VALIDATION_GATE] == "COMPLETE"
    assert image_runs.first.validation == "PASS"
    found = _gate_findings(image_runs.config, "span1")
    assert found["findings"] == []
    assert "skew: no serving data for this dataset, skew not checked" in found["notes"]
    assert any("no baseline" in n for n in found["notes"])


def test_own_images_of_another_size_pass_the_gate_with_warnings(image_runs):
    assert image_runs.own.validation == "WARN"
    found = _gate_findings(image_runs.config, "span2")
    assert (found["current_span"], found["baseline_span"]) == (2, 1)
    warned = {(f["kind"], f["feature"]) for f in found["findings"] if f["severity"] == "WARN"}
    assert warned == {("drift", "height"), ("drift", "width"), ("drift", "channels")}
    assert not [f for f in found["findings"] if f["severity"] == "BLOCK"]
    drift = {m["feature"]: m for m in found["measurements"] if m["kind"] == "drift"}
    # Every other image of each class: the class balance did not move.
    assert drift["label"]["measure"] == "L-infinity"
    assert drift["label"]["value"] < drift["label"]["threshold"]


def test_dominant_class_is_blocked_naming_label(image_runs):
    message = str(image_runs.imbalanced)
    assert message.startswith("validation gate blocked the run")
    label = [
        " ".join(ln.split()) for ln in message.splitlines() if ln.split()[:2] == ["label", "drift:"]
    ]
    assert len(label) == 1 and " L-infinity " in label[0] and " > 0.1 blocks" in label[0]
    assert "span 3 vs span 2" in message
    record = image_runs.imbalanced.record  # a line per finding, TFDV's descriptions whole
    assert "drift label: L-infinity" in record and "> threshold 0.1" in record
    assert f"The feature value with maximum difference is: {DOMINANT}" in record
    found = _gate_findings(image_runs.config, "span3")
    assert found["decision"] == "BLOCK"
    assert {f["feature"] for f in found["findings"] if f["severity"] == "BLOCK"} == {"label"}


def test_console_shows_digits_runs(image_runs):
    """`tfxp ui` over the digits store: two complete runs, span 3 blocked at the gate."""
    from console_check import check_console

    from metadata.store import location_from

    shown = check_console(location_from(run_dir=image_runs.config.local_dir))
    assert shown == {"span1": "complete", "span2": "complete", "span3": "blocked"}, shown


def test_both_digits_runs_evaluate_on_the_fast_path(image_runs):
    logs = "".join(p.read_text() for p in (Path(image_runs.config.run_dir) / "logs").glob("*.log"))
    assert logs.count("Evaluator: fast path") == 2, logs.count("Evaluator: TFMA path")


@pytest.mark.parametrize("baseline", [False, True], ids=["first-run", "against-baseline"])
def test_digits_fast_path_equals_tfma_per_digit(image_runs, baseline, tmp_path, caplog):
    """Span 2's evaluation repeated by the fast path and by TFX's executor (TFMA), with
    and without span 1's model as baseline: the accuracy, count and each class's
    fall-out and miss rate (TFMA's binarization) of the whole split and of every digit,
    the validation result and the blessing agree."""
    from evaluator_parity import assert_same_evaluation, fast_and_tfma
    from evaluator_runs import evaluator_inputs

    inputs, properties, _ = evaluator_inputs(image_runs.config)  # span 2's Evaluator
    assert inputs.get("baseline_model"), "span 2 is evaluated against span 1's model"
    if not baseline:
        inputs = {k: v for k, v in inputs.items() if k != "baseline_model"}
    values = assert_same_evaluation(*fast_and_tfma(inputs, properties, tmp_path, caplog))
    slices = {slice_key for slice_key, _ in values}
    assert len(slices) == 11  # the whole split and each digit
    names = {name for _, name in values}
    for metric in ("fall_out", "miss_rate"):
        candidate = {
            k
            for k in names
            if k.startswith(f'name: "{metric}"') and "is_diff" not in k and "baseline" not in k
        }
        assert len(candidate) == 10 and all("class_id" in k for k in candidate), candidate
    assert any('"sparse_categorical_accuracy"' in k for k in names)
    assert any("is_diff: true" in k for k in names) == baseline


def test_transform_fast_path_equals_tfx_on_images(image_runs, tmp_path, caplog):
    """Both runs' Transform took the fast path, and span 2's (own images, resized in
    the graph) gives TFX's executor's output on the same inputs (transform_parity.py)."""
    from transform_parity import compare_executors

    logs = Path(image_runs.config.run_dir) / "logs"
    assert "".join(p.read_text() for p in logs.glob("*.log")).count("Transform: fast path") == 2
    assert compare_executors(image_runs.config, tmp_path, caplog) > 0
    # Images: TFX's analysis source and tfx_bsl's encoder (the taxi test covers the others).
    assert "read the examples by their layout" not in caplog.text
    assert "encoded by tfx_bsl's encoder" in caplog.text
