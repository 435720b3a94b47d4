"""Resumable training (trainer/checkpoints.py): a Trainer SIGKILLed mid-training resumes
from its last checkpoint on the rerun, and the model it exports serves image bytes.

The Trainer runs in a process of its own (tests/support/image_training.py: the image run_fn on
16x16 RGB images, a tiny CNN, a checkpoint every 20 steps), as TFX's Trainer would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from trainer import checkpoints

TESTS = Path(__file__).resolve().parent
STEPS, EVERY = 600, 20


def _args(**changes):
    base = dict(
        train_files=["/r/Transform/transformed_examples/7/Split-train/*"],
        eval_files=["/r/Transform/transformed_examples/7/Split-eval/*"],
        transform_output="/r/Transform/transform_graph/7",
        train_steps=300,
        eval_steps=2,
        model_run_dir="/r/Trainer/model_run/12",
        custom_config={"code_fingerprint": "abc", "hyperparameters": {"batch_size": 8}},
        hyperparameters=None,
    )
    return SimpleNamespace(**{**base, **changes})


def test_the_checkpoint_folder_is_the_same_for_the_same_training():
    first = checkpoints.checkpoint_dir(_args())
    assert first.startswith("/r/Trainer/checkpoints/")
    # A rerun is a new execution with its own model-run folder: same training, same folder.
    assert checkpoints.checkpoint_dir(_args(model_run_dir="/r/Trainer/model_run/13/")) == first
    # Other data, code, settings or step counts: another folder (no stale weights).
    for change in (
        {"train_files": ["/r/Transform/transformed_examples/8/Split-train/*"]},
        {"custom_config": {"code_fingerprint": "abd", "hyperparameters": {"batch_size": 8}}},
        {"train_steps": 301},
        {"hyperparameters": {"values": {"learning_rate": 0.01}}},
    ):
        assert checkpoints.checkpoint_dir(_args(**change)) != first, change
    assert checkpoints.checkpoint_dir(_args(model_run_dir=None)) is None
    assert checkpoints.resumable_backup(_args(), 0, multi_worker=False) is None
    with pytest.raises(ValueError, match="checkpoint_steps"):
        checkpoints.ResumableBackup("/tmp/x", -1)


def _train(work: Path, run: str) -> subprocess.Popen:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "TF_USE_LEGACY_KERAS": "1"}
    return subprocess.Popen(
        [sys.executable, str(TESTS.parents[1] / "support" / "image_training.py"), str(work), run]
        + ["--steps", str(STEPS), "--checkpoint-steps", str(EVERY)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=TESTS.parents[2],
    )


def _wait_for_checkpoint(proc: subprocess.Popen, folder: Path, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    # `checkpoint` (the index of saved checkpoints) is written after the data it names.
    while not list(folder.glob("*/chief/checkpoint")):
        if proc.poll() is not None:
            pytest.fail(f"training ended before a checkpoint was written:\n{proc.stdout.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("no checkpoint within the deadline")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    """Training killed once it has a checkpoint, then run again to the end."""
    from image_training import make_inputs

    work = tmp_path_factory.mktemp("resume")
    make_inputs(work)
    first = _train(work, "1")
    _wait_for_checkpoint(first, work / "Trainer" / "checkpoints")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    killed_log = first.stdout.read()
    second = _train(work, "2")
    log, _ = second.communicate(timeout=600)
    assert second.returncode == 0, log
    return SimpleNamespace(work=work, killed=first, killed_log=killed_log, log=log)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_killed_training_resumes_from_its_last_checkpoint(resumed):
    assert resumed.killed.returncode == -signal.SIGKILL
    assert "training from step 0" in resumed.killed_log
    assert not (resumed.work / "Trainer" / "model" / "1" / "Format-Serving").exists()
    record = json.loads((resumed.work / "Trainer" / "model_run" / "2" / "resume.json").read_text())
    step = record["resumed_from_step"]
    assert 0 < step < STEPS and step % EVERY == 0, record
    assert f"resuming from step {step} " in resumed.log
    # Exported: the checkpoints are gone, so the next training starts afresh.
    assert not any((resumed.work / "Trainer" / "checkpoints").glob("*/chief"))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_resumed_model_serves_png_and_jpeg_bytes(resumed):
    """serving_default takes encoded files as `tfxp serve` receives them: any size, PNG or
    JPEG; decode_in: trainer, so the model's own decoding serves them. Reddish and bluish
    noise: the trained model tells them apart, in either format."""
    model_dir = resumed.work / "Trainer" / "model" / "2" / "Format-Serving"
    assert _serve_png_and_jpeg(model_dir).tolist() == [0, 1, 0, 1]


def _serve_png_and_jpeg(model_dir: Path) -> np.ndarray:
    """serving_default on a PNG and a JPEG of each class, at sizes other than the model's,
    sent as `tfxp serve` receives them: a :predict body of {"b64": ...} instances."""
    import base64

    import tensorflow as tf
    from image_training import pixels

    from data.images import encode_png
    from serving.codec import predict_inputs, predict_response
    from serving.models import load_version

    red, blue = pixels(0, 99_001, size=24), pixels(1, 99_002, size=20)
    files = [
        encode_png(red),
        tf.io.encode_jpeg(tf.constant(blue), quality=95).numpy(),
        tf.io.encode_jpeg(tf.constant(red), quality=95).numpy(),
        encode_png(blue),
    ]
    body = {"instances": [{"b64": base64.b64encode(f).decode()} for f in files]}
    loaded = load_version("images", 1, str(model_dir), max_batch_size=8, timeout_ms=1.0)
    try:
        signature = loaded.signatures["serving_default"]
        assert list(signature.inputs) == ["image_bytes"]
        inputs, rows, row_format = predict_inputs(body, signature, None)
        outputs = signature.call(inputs)
    finally:
        loaded.close()
    assert rows == 4
    predictions = predict_response(outputs, row_format)["predictions"]
    probabilities = np.array([p["probabilities"] for p in predictions])
    assert probabilities.shape == (4, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    return np.array([p["class"] for p in predictions])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_model_decoding_in_transform_serves_png_and_jpeg_bytes(tmp_path):
    """The default (decode_in: transform): the transform graph in the model decodes."""
    from image_training import OPTIONS, fn_args, make_inputs

    from trainer.image.train import run_fn

    options = {**OPTIONS, "decode_in": "transform"}
    make_inputs(tmp_path, train=128, evaluate=32, options=options)
    args = fn_args(tmp_path, "1", steps=150, checkpoint_steps=0, options=options)
    run_fn(args)
    assert not (Path(args.model_run_dir) / checkpoints.RESUME_FILE).exists()  # 0: none
    assert _serve_png_and_jpeg(Path(args.serving_model_dir)).tolist() == [0, 1, 0, 1]
