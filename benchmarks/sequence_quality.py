"""Sequence models against gradient boosting on per-sequence aggregates, same split.

    .venv/bin/python benchmarks/sequence_quality.py [--keys 4000] [--models conv,gru] [--json]

One invocation:
  1. generates shopping sessions (`data/sequences.py`: the label depends on order
     and on late events), runs `tfxp init --sequence-key --order-by` (no edit) and
     the whole pipeline once per sequence model (`ours`: conv and gru; the split is
     by a hash of the key, so every model sees the same sequences in each split);
  2. reads back the SequenceExamples ExampleGen put in the train and eval splits
     and fits scikit-learn's HistGradientBoostingClassifier with default settings
     (the `anchor`) on the train sequences' aggregates: length; mean, std, min,
     max, first and last of each numeric per-step feature; each category's share,
     first and last category of each categorical one; the context features;
  3. scores both on the eval split: ours through the pushed model's
     serving_default (the SequenceExamples as served), the anchor on the same
     sequences' aggregates. Accuracy and ROC AUC, and ours / anchor.
Also measured: ingest (events/s, ExampleGen's own figure) and training input
(sequences/s through trainer/sequence's length-bucketed tf.data input).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import glob
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

INPUT_BATCHES = 200


def _records(folder: str) -> list[bytes]:
    import tensorflow as tf

    files = sorted(glob.glob(os.path.join(folder, "*.gz")))
    return list(tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator())


def _values(feature) -> list:
    kind = feature.WhichOneof("kind")
    return list(getattr(feature, kind).value) if kind else []


def _decoded(records: list[bytes]):
    import tensorflow as tf

    return [tf.train.SequenceExample.FromString(r) for r in records]


def vocabularies(examples, options) -> dict[str, list]:
    """Every category of each categorical per-step and context feature, in a fixed order."""
    seen: dict[str, set] = {}
    for example in examples:
        for name, treatment in options.features.items():
            if treatment == "vocabulary":
                steps = example.feature_lists.feature_list[name].feature
                seen.setdefault(name, set()).update(v for f in steps for v in _values(f))
        for name, treatment in options.context.items():
            if treatment == "vocabulary":
                seen.setdefault(name, set()).update(_values(example.context.feature[name]))
    return {name: sorted(values) for name, values in seen.items()}


def labels_of(examples, options) -> np.ndarray:
    """Each sequence's label as its index in the dataset file's classes."""
    out = []
    for example in examples:
        label = _values(example.context.feature[options.label])[0]
        out.append(
            options.classes.index(label.decode() if isinstance(label, bytes) else str(label))
        )
    return np.array(out)


def aggregates(examples, options, vocab: dict[str, list]) -> tuple[np.ndarray, np.ndarray]:
    """(X, y): per-sequence aggregates, as the anchor sees them."""
    codes = {name: {v: float(i) for i, v in enumerate(values)} for name, values in vocab.items()}
    rows = []
    for example in examples:
        steps = example.feature_lists.feature_list
        row: list[float] = [len(steps[next(iter(options.features))].feature)]
        for name, treatment in options.features.items():
            values = [(_values(f) or [None])[0] for f in steps[name].feature]
            seen = [v for v in values if v is not None]
            if treatment == "vocabulary":
                row += [seen.count(c) / max(len(seen), 1) for c in vocab[name]]
                row += [codes[name][seen[0]], codes[name][seen[-1]]] if seen else [np.nan] * 2
            elif seen:
                arr = np.array(seen, dtype=float)
                row += [arr.mean(), arr.std(), arr.min(), arr.max(), arr[0], arr[-1]]
            else:
                row += [np.nan] * 6
        for name, treatment in options.context.items():
            value = (_values(example.context.feature[name]) or [None])[0]
            if value is None:
                row.append(np.nan)
            else:
                row.append(
                    codes[name].get(value, np.nan) if treatment == "vocabulary" else float(value)
                )
        rows.append(row)
    return np.array(rows, dtype=float), labels_of(examples, options)


def anchor_scores(train: list[bytes], eval_: list[bytes], options) -> tuple[np.ndarray, np.ndarray]:
    """(P(positive), labels) of the eval sequences from HistGradientBoosting on aggregates."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    train_examples, eval_examples = _decoded(train), _decoded(eval_)
    vocab = vocabularies(train_examples + eval_examples, options)  # one coding for both
    x_train, y_train = aggregates(train_examples, options, vocab)
    x_eval, y_eval = aggregates(eval_examples, options, vocab)
    model = HistGradientBoostingClassifier(random_state=0).fit(x_train, y_train)
    return model.predict_proba(x_eval)[:, 1], y_eval


def ours_scores(model_dir: str, eval_: list[bytes]) -> np.ndarray:
    import tensorflow as tf

    serve = tf.saved_model.load(model_dir).signatures["serving_default"]
    out = [
        serve(examples=tf.constant(eval_[i : i + 512]))["logistic"].numpy().reshape(-1)
        for i in range(0, len(eval_), 512)
    ]
    return np.concatenate(out)


def quality(scores: np.ndarray, labels: np.ndarray) -> dict:
    from sklearn.metrics import roc_auc_score

    return {
        "accuracy": round(float(((scores >= 0.5) == labels).mean()), 4),
        "auc": round(float(roc_auc_score(labels, scores)), 4),
    }


def input_rate(config, run_dir: Path) -> float:
    """Sequences per second through the trainer's length-bucketed input."""
    import tensorflow_transform as tft

    from trainer.sequence.features import sequence_spec
    from trainer.sequence.train import dataset

    root = run_dir / "pipeline_root" / "Transform"
    graph = sorted(glob.glob(str(root / "transform_graph" / "*")))[-1]
    examples = sorted(glob.glob(str(root / "transformed_examples" / "*")))[-1]
    spec = sequence_spec({"sequence": config.sequence.to_dict()})
    output = tft.TFTransformOutput(graph)
    data = dataset(
        os.path.join(examples, "Split-train", "*"),
        output.transformed_feature_spec(),
        spec,
        64,
        training=True,
    )
    it = iter(data)
    next(it)
    started, n = time.perf_counter(), 0
    for _ in range(INPUT_BATCHES):
        x, _ = next(it)
        n += int(x["sequence_length_xf"].shape[0])
    return n / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--keys", type=int, default=4000, help="sessions to generate")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--models", default="conv,gru")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    from data.sequences import write_events
    from pipeline.datasets import DATASET_PATH_ENV, dataset_config
    from tfxp.cli import main as tfxp
    from tfxp.local.runner import run_local

    tmp = Path(tempfile.mkdtemp(prefix="sequence-quality-"))
    home = tmp / "schema"
    os.environ[DATASET_PATH_ENV] = str(home)
    written = write_events(tmp / "events", args.keys, seed=args.seed, files=3)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = tfxp(["init", "shop", "--csv", *sorted(str(p) for p in (tmp / "events").glob("*.csv")),
                     "--label", "converted", "--sequence-key", "session_id", "--order-by",
                     "event_time", "--data-root", str(tmp / "data")])  # fmt: skip
    if code:
        raise SystemExit(f"tfxp init failed:\n{out.getvalue()}")
    print(out.getvalue())
    base = dataset_config("shop")
    result: dict = {"keys": args.keys, "events": written["events"], "models": {}}
    eval_records = train_records = None
    for name in args.models.split(","):
        config = base.replace(
            run_dir=str(tmp / f"run-{name}"),
            sequence=dataclasses.replace(base.sequence, model=name),
        )
        started = time.perf_counter()
        summary = run_local(config, printer=lambda _: None)
        seconds = time.perf_counter() - started
        if not summary.pushed:
            print(summary.render())
        ingested = tmp / f"run-{name}" / "pipeline_root" / "SequenceExampleGen" / "examples"
        examples = sorted(glob.glob(str(ingested / "*")), key=lambda p: int(Path(p).name))[-1]
        train_records = _records(os.path.join(examples, "Split-train"))
        eval_records = _records(os.path.join(examples, "Split-eval"))
        labels = labels_of(_decoded(eval_records), config.sequence)
        model_dir = sorted(glob.glob(os.path.join(config.serving_dir, "[0-9]*")))[-1]
        scores = quality(ours_scores(model_dir, eval_records), labels)
        from metadata.properties import prop
        from metadata.store import location_from, open_store

        store = open_store(location_from(run_dir=config.local_dir))
        ingest = [
            a for a in store.get_artifacts_by_type("Examples") if "SequenceExampleGen" in a.uri
        ]
        result["models"][name] = {
            **scores,
            "blessed": bool(summary.blessed),
            "pipeline_seconds": round(seconds, 1),
            "ingest_events_per_second": prop(ingest[0], "events_per_second"),
            "input_sequences_per_second": round(input_rate(config, tmp / f"run-{name}"), 1),
        }
        print(f"{name}: {result['models'][name]}", flush=True)
    anchor, labels = anchor_scores(train_records, eval_records, base.sequence)
    result["anchor"] = quality(anchor, labels)
    result["train_sequences"], result["eval_sequences"] = len(train_records), len(eval_records)
    for name, scores in result["models"].items():
        scores["accuracy_ratio"] = round(scores["accuracy"] / result["anchor"]["accuracy"], 4)
        scores["auc_ratio"] = round(scores["auc"] / result["anchor"]["auc"], 4)
        print(f"{name}: accuracy {scores['accuracy']:.4f} vs anchor {result['anchor']['accuracy']:.4f} "
              f"(ratio {scores['accuracy_ratio']:.3f}); AUC {scores['auc']:.4f} vs "
              f"{result['anchor']['auc']:.4f} (ratio {scores['auc_ratio']:.3f})")  # fmt: skip
    if args.json:
        print(json.dumps({"benchmark": "sequence_quality", **result}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
