"""`model: gbt`: scikit-learn's trees as TF ops (trainer/tabular/trees.py, sklearn_trees.py),
the gbt trainer's model and hyperparameters (trainer/tabular/gbt.py) and the dataset
file's `model:` key (pipeline/models.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

import compat
from compat import sklearn as sklearn_internals
from pipeline.config import GENERIC_RUN_FN
from pipeline.dataset_sections import DatasetFileError
from pipeline.datasets import load_dataset_file
from pipeline.models import GBT_HYPERPARAMETERS, GBT_RUN_FN, GBT_TUNABLE
from trainer.tabular.features import TabularSpec
from trainer.tabular.gbt import GbtHyperparameters, GbtModel, eval_loss, fit
from trainer.tabular.sklearn_trees import ensemble_arrays
from trainer.tabular.trees import EnsembleArrays, TreeEnsemble, raw_scores


def _table(rows: int = 600, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 4))
    x[:, 3] = rng.integers(0, 5, rows)  # a vocabulary id, as the transform emits it
    x[rng.random(x.shape) < 0.1] = np.nan  # the trees route NaN; the graph must agree
    # float32 values, as the transformed examples hold them.
    return x.astype(np.float32).astype(np.float64)


def _target(x: np.ndarray, task: str) -> np.ndarray:
    signal = np.nan_to_num(x[:, 0]) + 0.5 * np.nan_to_num(x[:, 3])
    if task == "regression":
        return 10 * signal + np.random.default_rng(1).normal(size=len(x))
    if task == "binary":
        return (signal > 1).astype(np.int64)
    return np.digitize(signal, [0.0, 1.5]).astype(np.int64)


ESTIMATORS = {
    "regression": (HistGradientBoostingRegressor, 1),
    "binary": (HistGradientBoostingClassifier, 1),
    "multiclass": (HistGradientBoostingClassifier, 3),
}


@pytest.mark.parametrize("task", sorted(ESTIMATORS))
def test_the_graph_scores_exactly_as_scikit_learn(task):
    kind, outputs = ESTIMATORS[task]
    x = _table()
    estimator = kind(max_iter=30, random_state=0).fit(x, _target(x, task))
    arrays = ensemble_arrays(estimator, outputs)
    expected = estimator._raw_predict(x)
    # Unseen rows too: values on no training threshold, and all-NaN rows.
    unseen = np.vstack([_table(50, seed=9), np.full((3, 4), np.nan)])
    for rows, want in ((x, expected), (unseen, estimator._raw_predict(unseen))):
        np.testing.assert_allclose(raw_scores(arrays, rows), want, rtol=0, atol=1e-9)
        got = TreeEnsemble(arrays)(tf.constant(rows, tf.float32)).numpy()
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


def test_a_multiclass_model_missing_a_class_in_training_gives_it_no_probability():
    x = _table()
    y = _target(x, "multiclass")
    keep = y != 1
    y = np.where(y[keep] == 2, 3, y[keep])  # classes 0 and 3 of 4... only 2 present: refused
    with pytest.raises(ValueError, match="only classes"):
        ensemble_arrays(HistGradientBoostingClassifier(max_iter=5).fit(x[keep], y), 4)
    y4 = _target(x, "multiclass")
    y4 = np.where(y4 == 2, 3, y4)  # classes 0, 1, 3 of 4: class 2 never seen
    estimator = HistGradientBoostingClassifier(max_iter=5).fit(x, y4)
    spec = _spec("multiclass", classes=("a", "b", "c", "d"))
    model = GbtModel(
        TreeEnsemble(ensemble_arrays(estimator, 4)), ["f0", "f1", "f2", "f3"], "multiclass"
    )
    probabilities = model({f"f{i}": tf.constant(x[:, i], tf.float32) for i in range(4)}).numpy()
    assert probabilities.shape == (len(x), 4)
    np.testing.assert_allclose(probabilities[:, 2], 0.0, atol=1e-12)
    np.testing.assert_allclose(probabilities[:, [0, 1, 3]], estimator.predict_proba(x), atol=1e-6)
    assert np.isfinite(eval_loss(spec, estimator, x, np.full(len(x), 2)))


def _spec(task: str, classes: tuple[str, ...] = ()) -> TabularSpec:
    if not classes and task != "regression":
        classes = ("no", "yes") if task == "binary" else ("a", "b", "c")
    return TabularSpec("y", task, classes, ())


@pytest.mark.parametrize("task", sorted(ESTIMATORS))
def test_the_model_outputs_what_the_mlp_outputs_and_survives_a_saved_model(task, tmp_path):
    x = _table()
    y = _target(x, task)
    spec = _spec(task)
    estimator, ensemble = fit(spec, GbtHyperparameters(max_iter=20), x, y)
    columns = ["b", "a", "d", "c"]  # the model stacks its inputs in this order
    model = GbtModel(ensemble, columns, task)

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def serve(rows):
        return {"out": model({c: rows[:, i] for i, c in enumerate(columns)})}

    tf.saved_model.save(model, str(tmp_path), signatures={"serving_default": serve})
    loaded = tf.saved_model.load(str(tmp_path)).signatures["serving_default"]
    out = loaded(rows=tf.constant(x, tf.float32))["out"].numpy()
    if task == "regression":
        np.testing.assert_allclose(out[:, 0], estimator.predict(x), rtol=1e-5)
    elif task == "binary":
        assert out.shape == (len(x), 1)
        np.testing.assert_allclose(out[:, 0], estimator.predict_proba(x)[:, 1], atol=1e-6)
    else:
        np.testing.assert_allclose(out, estimator.predict_proba(x), atol=1e-6)
    # The loss the Trainer logs (and the Tuner's trials minimise) is the fitted model's.
    loss = eval_loss(spec, estimator, x, y)
    assert 0 <= loss < eval_loss(spec, _constant(spec, x, y), x, y)


def _constant(spec: TabularSpec, x, y):
    kind = (
        HistGradientBoostingRegressor
        if spec.task == "regression"
        else HistGradientBoostingClassifier
    )
    return kind(max_iter=1, learning_rate=1e-9).fit(x, y)


def test_arrays_of_different_shapes_are_refused():
    ones = np.ones((2, 3))
    fields = dict(
        feature=ones.astype(int), threshold=ones, missing_left=ones, left=ones, right=ones,
        leaf=ones, value=ones, column=np.zeros(2, int), baseline=np.zeros(1), depth=1,
    )  # fmt: skip
    EnsembleArrays(**fields)
    with pytest.raises(ValueError, match="value has shape"):
        EnsembleArrays(**{**fields, "value": np.ones((2, 4))})
    with pytest.raises(ValueError, match="output column"):
        EnsembleArrays(**{**fields, "column": np.array([0, 1])})


def test_another_scikit_learn_layout_is_refused_by_name(monkeypatch):
    compat.check_version("scikit-learn", sklearn_internals.WRITTEN_FOR)
    monkeypatch.setattr(compat.metadata, "version", lambda _: "1.6.0")
    with pytest.raises(compat.CompatError, match="scikit-learn 1.6.0 is installed"):
        compat.check_version("scikit-learn", sklearn_internals.WRITTEN_FOR)


def test_the_loader_knows_every_gbt_hyperparameter_and_tunable():
    fields = [f.name for f in dataclasses.fields(GbtHyperparameters)]
    assert list(GBT_HYPERPARAMETERS) == fields
    assert set(GBT_TUNABLE) <= set(fields)
    with pytest.raises(ValueError, match="hidden_units"):
        GbtHyperparameters.from_custom_config({"hyperparameters": {"hidden_units": [8]}})


TABLE = """\
label: kind
task: binary
classes: [a, b]
features: {{size: zscore}}
{extra}
"""


def _load(tmp_path: Path, extra: str):
    folder = tmp_path / "t"
    folder.mkdir(exist_ok=True)
    (folder / "dataset.yaml").write_text(TABLE.format(extra=extra))
    return load_dataset_file(folder / "dataset.yaml")


def test_model_gbt_picks_the_gbt_trainer_and_its_tunables(tmp_path):
    assert _load(tmp_path, "").run_fn == GENERIC_RUN_FN
    assert _load(tmp_path, "model: mlp").run_fn == GENERIC_RUN_FN
    config = _load(
        tmp_path,
        "model: gbt\nhyperparameters: {max_iter: 50}\n"
        "tuning: {search_space: {max_leaf_nodes: {min: 8, max: 64}}}",
    )
    assert config.run_fn == GBT_RUN_FN
    assert config.hyperparameters == {"max_iter": 50}
    assert config.tuning.search_space == {
        "max_leaf_nodes": {"min": 8, "max": 64, "sampling": "linear"}
    }


@pytest.mark.parametrize(
    "extra, message",
    [
        ("model: xgboost", r"model must be one of \['gbt', 'mlp'\], not 'xgboost'"),
        ("model: gbt\nhyperparameters: {hidden_units: [64, 32]}", r"\['hidden_units'\] are not model: gbt's"),
        ("model: gbt\nrun_fn: my.run_fn", "own run_fn"),
        ("model: gbt\ntuning: {search_space: {hidden_units: {choices: [[8]]}}}", "unknown hyperparameter"),
    ],
)  # fmt: skip
def test_a_wrong_model_key_is_refused_naming_the_file(tmp_path, extra, message):
    with pytest.raises(DatasetFileError, match=message) as e:
        _load(tmp_path, extra)
    assert "dataset.yaml" in str(e.value)


def _records(path: Path, rows: list[dict]) -> str:
    with tf.io.TFRecordWriter(str(path), "GZIP") as w:
        for r in rows:
            feature = {
                "a_xf": tf.train.Feature(float_list=tf.train.FloatList(value=[r["a"]])),
                "v_xf": tf.train.Feature(float_list=tf.train.FloatList(value=r["v"])),
                "y_xf": tf.train.Feature(int64_list=tf.train.Int64List(value=[r["y"]])),
                # A blank number: the mean (0 after z-scoring) and its indicator.
                "b_xf": tf.train.Feature(float_list=tf.train.FloatList(value=[r["b"]])),
                "b_missing": tf.train.Feature(float_list=tf.train.FloatList(value=[r["m"]])),
            }
            w.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )
    return str(path)


def test_a_split_is_read_one_column_per_value_and_the_model_reads_alike(tmp_path):
    from trainer.tabular.gbt import read_split

    rows = [
        {
            "a": float(i),
            "v": [i * 0.5, -i],
            "y": i % 2,
            "b": 0.0 if i % 3 else i,
            "m": float(i % 3 > 0),
        }
        for i in range(30)
    ]
    files = _records(tmp_path / "part.gz", rows)
    spec = TabularSpec("y", "binary", ("no", "yes"), ())
    feature_spec = {
        "a_xf": tf.io.FixedLenFeature([], tf.float32),
        "v_xf": tf.io.FixedLenFeature([2], tf.float32),
        "y_xf": tf.io.FixedLenFeature([], tf.int64),
        "b_xf": tf.io.FixedLenFeature([], tf.float32),
        "b_missing": tf.io.FixedLenFeature([], tf.float32),
    }
    x, y = read_split(files, feature_spec, spec, batch_size=7)
    # Columns sorted by name (a_xf, b_missing, b_xf, v_xf); a blank b is NaN for the trees.
    b = [np.nan if r["m"] else r["b"] for r in rows]
    expected = [[r["a"], r["m"], b[i], *r["v"]] for i, r in enumerate(rows)]
    np.testing.assert_array_equal(x, expected)
    np.testing.assert_array_equal(y, [r["y"] for r in rows])
    estimator, ensemble = fit(spec, GbtHyperparameters(max_iter=5, min_samples_leaf=2), x, y)
    columns = ["a_xf", "b_missing", "b_xf", "v_xf"]
    model = GbtModel(ensemble, columns, "binary")
    transformed = {
        "a_xf": tf.constant([r["a"] for r in rows], tf.float32),
        "b_xf": tf.constant([r["b"] for r in rows], tf.float32),
        "b_missing": tf.constant([r["m"] for r in rows], tf.float32),
        "v_xf": tf.constant([r["v"] for r in rows], tf.float32),
    }
    out = model(transformed).numpy()
    np.testing.assert_allclose(out[:, 0], estimator.predict_proba(x)[:, 1], atol=1e-6)
    with pytest.raises(ValueError, match="'v_xf' is sparse or ragged"):
        read_split(files, {**feature_spec, "v_xf": tf.io.VarLenFeature(tf.float32)}, spec)


def test_a_multi_worker_cluster_is_refused(monkeypatch):
    import json

    from trainer.distribution import ClusterConfigError
    from trainer.tabular.gbt import run_fn

    cluster = {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(cluster))
    with pytest.raises(ClusterConfigError, match="model: gbt trains in one process"):
        run_fn(object())


def test_class_weights_weigh_the_rare_class_as_the_mlp_does():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3000, 4))
    # A rare class (about 5%) that overlaps the common one: unweighted trees mostly miss it.
    y = ((x[:, 0] + rng.normal(scale=1.0, size=len(x))) > 2.3).astype(np.int64)
    plain, _ = fit(_spec("binary"), GbtHyperparameters(max_iter=30), x, y)
    weighted_spec = TabularSpec("y", "binary", ("no", "yes"), (), class_weights=(0.5, 10.0))
    weighted, _ = fit(weighted_spec, GbtHyperparameters(max_iter=30), x, y)
    rare = y == 1
    recall = {
        name: (m.predict(x[rare]) == 1).mean()
        for name, m in (("plain", plain), ("weighted", weighted))
    }
    assert recall["weighted"] > recall["plain"] + 0.2, recall
