"""The sequence trainer's pieces (trainer/sequence/), the gate's length check and the
serving encoder for SequenceExamples."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_metadata.proto.v0 import statistics_pb2

from components.validation.findings import BLOCK
from components.validation.sequence_checks import (
    LENGTH_FEATURE,
    SHORTENED,
    LengthSummary,
    length_findings,
    length_summary,
)
from trainer.sequence.features import LENGTH_XF, SequenceSpec
from trainer.sequence.model import build_model
from trainer.sequence.preprocessing import cut_steps, first_values
from trainer.sequence.train import bucket_boundaries, trim_to_longest

SPEC = SequenceSpec(
    key="k",
    label="y",
    task="binary",
    classes=("no", "yes"),
    context={"c": "zscore", "d": "vocabulary"},
    features={"x": "zscore", "a": "vocabulary"},
    max_length=8,
)


def _ragged(rows: list[list[list[float]]]) -> tf.RaggedTensor:
    return tf.ragged.constant(rows, dtype=tf.float32, ragged_rank=2)


def test_cut_steps_keeps_the_last_max_length_steps_of_each_sequence():
    x = _ragged([[[1.0], [2.0], [3.0], [4.0]], [[5.0]], [[6.0], [], [7.0]]])
    steps, lengths = cut_steps(x, 2, keep_last=True)
    values, present = first_values(steps, 0.0)
    assert lengths.numpy().tolist() == [2, 1, 2]
    assert values.numpy().tolist() == [3.0, 4.0, 5.0, 0.0, 7.0]
    assert present.numpy().tolist() == [True, True, True, False, True]
    first, _ = cut_steps(x, 2, keep_last=False)
    assert first_values(first, 0.0)[0].numpy().tolist() == [1.0, 2.0, 5.0, 6.0, 0.0]


def test_length_buckets_and_trimming_keep_padding_small():
    assert bucket_boundaries(64) == [5, 9, 17, 33]
    features = {
        "x_xf": tf.zeros([2, 8]),
        LENGTH_XF: tf.constant([3, 5], tf.int64),
        "c_xf": tf.ones([2]),
    }
    trimmed = trim_to_longest(features, ["x_xf"])
    assert trimmed["x_xf"].shape == (2, 5) and trimmed["c_xf"].shape == (2,)


@pytest.mark.parametrize("kind", ["gru", "conv"])
def test_the_model_ignores_padding_beyond_each_length(kind):
    spec = SequenceSpec(**{**SPEC.__dict__, "model": kind})
    model = build_model(spec, {"a": 3, "d": 2})
    rng = np.random.default_rng(0)
    steps = {
        "x_xf": rng.normal(size=(2, 6)).astype("float32"),
        "a_xf": np.array([[1, 2, 3, 0, 0, 0]] * 2),
    }
    base = {
        **steps,
        LENGTH_XF: np.array([3, 3]),
        "c_xf": np.array([0.5, -0.5], "float32"),
        "d_xf": np.array([1, 2]),
    }
    noisy = {**base, "x_xf": base["x_xf"].copy()}
    noisy["x_xf"][:, 3:] = 99.0  # padding: must change nothing
    out = model(base).numpy()
    assert out.shape == (2, 1) and np.all((out > 0) & (out < 1))
    np.testing.assert_allclose(model(noisy).numpy(), out, atol=1e-6)


def _stats(
    avg: float, low: int, high: int, n: int = 100
) -> statistics_pb2.DatasetFeatureStatisticsList:
    stats = statistics_pb2.DatasetFeatureStatisticsList()
    feature = stats.datasets.add().features.add()
    feature.path.step.extend(["##SEQUENCE##", "x"])
    common = feature.num_stats.common_stats
    common.num_non_missing, common.avg_num_values = n, avg
    common.min_num_values, common.max_num_values = low, high
    return stats


def test_shortened_sequences_block_and_similar_lengths_pass():
    before = length_summary(_stats(15.0, 4, 60))
    assert before == LengthSummary(100, 15.0, 4, 60)
    found = length_findings(length_summary(_stats(7.5, 2, 30)), before, "drift", "span 2 vs 1")
    assert [(f.feature, f.anomaly, f.severity) for f in found] == [
        (LENGTH_FEATURE, SHORTENED, BLOCK)
    ]
    assert "mean 7.5 steps" in found[0].description
    assert length_findings(length_summary(_stats(14.0, 4, 60)), before, "drift", "") == []
    assert length_summary(statistics_pb2.DatasetFeatureStatisticsList()) is None


def test_the_serving_encoder_builds_sequence_examples_and_names_bad_values():
    from serving.codec import ClientError, SequenceExampleEncoder

    encode = SequenceExampleEncoder(
        {"k": "BYTES", "y": "BYTES", "c": "FLOAT"}, {"x": "FLOAT", "a": "BYTES"}, "y"
    )
    raw = encode({"k": "s", "y": "yes", "c": 2, "x": [1.0, None], "a": ["v", "w"]}, "examples[0]")
    example = tf.train.SequenceExample.FromString(raw)
    assert "y" not in example.context.feature  # the label is never an input
    assert [list(f.float_list.value) for f in example.feature_lists.feature_list["x"].feature] == [
        [1.0],
        [],
    ]
    assert encode({"b64": "AAE="}, "examples[1]") == b"\x00\x01"
    with pytest.raises(ClientError, match=r"examples\[0\]\.x: a per-step feature is a list"):
        encode({"x": 1.0}, "examples[0]")
    with pytest.raises(ClientError, match=r"examples\[0\]\.x\[1\]: 'a' is not a number"):
        encode({"x": [1.0, "a"]}, "examples[0]")


def test_the_gate_blocks_served_sequences_shorter_than_training_ones():
    from components.validation.findings import SKEW
    from components.validation.sequence_checks import gate_findings

    current = {"train": _stats(15.0, 4, 60), "eval": _stats(15.0, 4, 60)}
    found, notes = gate_findings(
        current,
        None,
        _stats(6.0, 1, 20),
        current_span=3,
        baseline_span=None,
        serving_source="serving log",
    )
    assert [(f.kind, f.anomaly) for f in found] == [(SKEW, SHORTENED)]
    assert "mean 15.0 steps" in notes[0]
    # Data without feature lists: nothing to say.
    empty = {"train": statistics_pb2.DatasetFeatureStatisticsList()}
    assert gate_findings(
        empty, None, None, current_span=1, baseline_span=None, serving_source=""
    ) == ([], [])
