"""Model quality on tables: our tabular models against scikit-learn's HistGradientBoosting.

    .venv/bin/python benchmarks/tabular_quality.py [--tables taxi,wine,...] [--json]

What a user would otherwise reach for on a table is gradient boosting with
default settings. For each table of TABLES, one invocation:
  1. writes the table as CSV and runs what a user runs: `tfxp init` (no edit),
     then the whole pipeline with the model `init` chose for the table's size
     (`ours`: `model: mlp` or `model: gbt`, tfxp/init/model_choice.py);
  2. switches the dataset file to the other model (with the hyperparameters
     `init` writes for it) and runs again: ExampleGen and Transform are cached,
     the same rows are in each split;
  3. reads back the rows ExampleGen put in the train and eval splits (the
     Examples artifact's raw tf.Examples) and fits scikit-learn's
     HistGradientBoostingClassifier/Regressor with default settings (the
     `anchor`) on the train rows, over the same feature columns the dataset file
     uses (numbers as numbers, blanks as NaN; strings ordinal-encoded on the
     train rows, unseen values NaN), and scores it on the eval rows.
Ours are the Evaluator's metrics on the same eval rows. Reported per table:
accuracy (classification) or RMSE (regression) of the MLP, gbt and the anchor,
each model's ratio to the anchor, and whether the target holds: accuracy at
most 1 point below the anchor's, RMSE at most 5% above it.

A table is one entry of TABLES (name, label column, task, a function writing
the CSV, a sentence about it): adding one is adding an entry.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

ACCURACY_POINTS = 0.01  # ours may be at most 1 point of accuracy below the anchor
RMSE_RATIO = 1.05  # and at most 5% above its RMSE
METRIC = {
    "binary": "binary_accuracy",
    "multiclass": "sparse_categorical_accuracy",
    "regression": "root_mean_squared_error",
}


@dataclass(frozen=True)
class Table:
    name: str
    label: str
    task: str
    write: Callable[[Path], None]  # writes the table's CSV to the path
    about: str


def _write_rows(path: Path, header: list[str], rows) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def _cell(value: float, blank: bool) -> str:
    return "" if blank else f"{value:.6g}"


def write_taxi(path: Path) -> None:
    """The embedded taxi span with trainer/taxi's label: the tip is over 20% of the fare."""
    with (ROOT / "data" / "taxi" / "span-1" / "data.csv").open() as f:
        rows = list(csv.DictReader(f))
    header = [k for k in rows[0] if k != "tips"] + ["big_tipper"]
    out = []
    for r in rows:
        fare, tips = r["fare"], r["tips"]
        big = int(bool(fare and tips) and float(tips) > 0.2 * float(fare))
        out.append([r[k] for k in header[:-1]] + [big])
    _write_rows(path, header, out)


def _with_categories(x: np.ndarray, y_signal: np.ndarray, rng) -> tuple[list[str], list[list]]:
    """Numeric columns (5% blank) plus two string columns: one tied to the signal, one noise."""
    header = [f"x{i}" for i in range(x.shape[1])] + ["grade", "region"]
    grade = np.array(list("ABCDE"))[
        np.digitize(y_signal, np.quantile(y_signal, [0.2, 0.4, 0.6, 0.8]))
    ]
    flip = rng.random(len(x)) < 0.3  # the grade is a noisy view of the signal
    grade[flip] = rng.choice(list("ABCDE"), flip.sum())
    region = rng.choice(["north", "south", "east", "west"], len(x))
    rows = [
        [_cell(v, rng.random() < 0.05) for v in x[i]] + [grade[i], region[i]] for i in range(len(x))
    ]
    return header, rows


def write_classification(path: Path) -> None:
    from sklearn.datasets import make_classification

    rng = np.random.default_rng(11)
    x, y = make_classification(
        n_samples=6000, n_features=10, n_informative=6, n_redundant=2, n_classes=3,
        n_clusters_per_class=2, class_sep=0.8, random_state=11,
    )  # fmt: skip
    header, rows = _with_categories(x, x[:, 0] + y, rng)
    names = np.array(["bronze", "silver", "gold"])[y]
    _write_rows(path, [*header, "tier"], [[*r, names[i]] for i, r in enumerate(rows)])


def write_regression(path: Path) -> None:
    from sklearn.datasets import make_friedman1

    rng = np.random.default_rng(12)
    x, y = make_friedman1(n_samples=6000, n_features=8, noise=1.0, random_state=12)
    header, rows = _with_categories(x, y, rng)
    # The string grade also moves the target (as a category does in a real table).
    shift = {"A": -2.0, "B": -1.0, "C": 0.0, "D": 1.0, "E": 2.0}
    target = [y[i] + shift[r[-2]] for i, r in enumerate(rows)]
    _write_rows(path, [*header, "price"], [[*r, f"{target[i]:.6g}"] for i, r in enumerate(rows)])


def write_imbalanced(path: Path) -> None:
    from sklearn.datasets import make_classification

    rng = np.random.default_rng(13)
    x, y = make_classification(
        n_samples=6000, n_features=10, n_informative=5, weights=[0.95], flip_y=0.01,
        class_sep=1.0, random_state=13,
    )  # fmt: skip
    header, rows = _with_categories(x, x[:, 0] + 2 * y, rng)
    label = np.array(["no", "yes"])[y]
    _write_rows(path, [*header, "churned"], [[*r, label[i]] for i, r in enumerate(rows)])


def _e2e_table(name: str) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        from data.tables import write_table

        write_table(name, path)

    return write


def _cars_table(path: Path) -> None:
    from data.tables import write_cars

    write_cars(path)


TABLES = [
    Table("taxi", "big_tipper", "binary", write_taxi,
          "the embedded Chicago taxi span, 15,002 trips; label as trainer/taxi's (tip > 20% of fare)"),
    Table("wine", "cultivar", "multiclass", _e2e_table("wine"),
          "scikit-learn's wine, 178 rows, with a string column and blanks (the e2e tests' table)"),
    Table("cancer", "diagnosis", "binary", _e2e_table("cancer"),
          "scikit-learn's breast cancer, 569 rows, as the e2e tests write it"),
    Table("diabetes", "progression", "regression", _e2e_table("diabetes"),
          "scikit-learn's diabetes, 442 rows, as the e2e tests write it"),
    Table("classification", "tier", "multiclass", write_classification,
          "generated: 6,000 rows, 3 classes, 10 numbers (5% blank), 2 string columns"),
    Table("regression", "price", "regression", write_regression,
          "generated: 6,000 rows, Friedman #1 plus a string grade that moves the target"),
    Table("imbalanced", "churned", "binary", write_imbalanced,
          "generated: 6,000 rows, 5% positives, 10 numbers, 2 string columns"),
    Table("cars", "MPG", "regression", _cars_table,
          "cars-like, 406 rows: 8 blank labels, an ISO date, a near-unique name, free text"),
]  # fmt: skip


def _tfxp(home: Path, *args: str) -> str:
    from pipeline.datasets import DATASET_PATH_ENV
    from tfxp.cli import main

    os.environ[DATASET_PATH_ENV] = str(home)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    if code != 0:
        raise RuntimeError(f"tfxp {' '.join(args)} failed:\n{out.getvalue()}\n{err.getvalue()}")
    return out.getvalue()


def _use_model(dataset_file: Path, model: str, rows: int) -> None:
    """The dataset file of a `rows`-row table switched to `model` with the hyperparameters
    (and train steps) `tfxp init` writes for it."""
    import yaml

    from tfxp.init.dataset_file import train_steps
    from tfxp.init.model_choice import GBT_HYPERPARAMETERS, MLP_HYPERPARAMETERS, mlp_batch_size

    raw = yaml.safe_load(dataset_file.read_text())
    raw["model"] = model
    batch = mlp_batch_size(rows)
    raw["train_steps"] = train_steps(rows, batch)
    raw["hyperparameters"] = (
        dict(GBT_HYPERPARAMETERS)
        if model == "gbt"
        else {"batch_size": batch, **MLP_HYPERPARAMETERS}
    )
    dataset_file.write_text(yaml.safe_dump(raw, sort_keys=False))


def _run(config) -> tuple[dict, float, bool]:
    from tfxp.local.runner import run_local

    summary = run_local(config, printer=lambda _: None)
    trainer = next(c.seconds for c in summary.components if c.node_id == "Trainer")
    return summary.metrics, trainer, bool(summary.blessed)


def split_rows(pipeline_root: str) -> dict[str, list[dict]]:
    """Split name ("train", "eval") -> the raw rows ExampleGen wrote there (one Examples artifact)."""
    import tensorflow as tf

    [artifact] = sorted(Path(pipeline_root).glob("CsvExampleGen/examples/*"))
    splits = {}
    for folder in sorted(artifact.glob("Split-*")):
        records = tf.data.TFRecordDataset(sorted(map(str, folder.glob("*"))), "GZIP")
        rows = []
        for record in records.as_numpy_iterator():
            row = {}
            for key, feature in tf.train.Example.FromString(record).features.feature.items():
                kind = feature.WhichOneof("kind")
                values = list(getattr(feature, kind).value) if kind else []
                value = values[0] if values else None
                row[key] = value.decode() if isinstance(value, bytes) else value
            rows.append(row)
        splits[folder.name.removeprefix("Split-")] = rows
    return splits


def anchor_score(splits: dict[str, list[dict]], features: dict, label: str, task: str):
    """HistGradientBoosting (default settings) fitted on the train rows, scored on the eval rows."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.preprocessing import OrdinalEncoder
    from threadpoolctl import threadpool_limits

    from trainer.tabular.gbt import SINGLE_THREAD_ROWS

    names = sorted(features)
    # Strings (categories, dates, free text) ordinal-encoded on the train rows, as a user
    # handing a table to HistGradientBoosting would; an ISO date keeps its order so.
    text_treatments = ("vocabulary", "date", "timestamp", "text")
    strings = [n for n in names if features[n]["treatment"] in text_treatments]

    def matrix(rows: list[dict], encoder: OrdinalEncoder | None) -> np.ndarray:
        numbers = np.array(
            [
                [np.nan if r.get(n) is None else float(r[n]) for n in names if n not in strings]
                for r in rows
            ],
            dtype=np.float64,
        ).reshape(len(rows), -1)
        if not strings:
            return numbers
        text = np.array([[str(r.get(n) or "") for n in strings] for r in rows], dtype=object)
        return np.hstack([numbers, encoder.transform(text)])

    encoder = None
    if strings:
        encoder = OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan)
        encoder.fit(
            np.array(
                [[str(r.get(n) or "") for n in strings] for r in splits["train"]], dtype=object
            )
        )
    x_train, x_eval = matrix(splits["train"], encoder), matrix(splits["eval"], encoder)
    target = float if task == "regression" else str
    y_train = np.array([target(r[label]) for r in splits["train"]])
    y_eval = np.array([target(r[label]) for r in splits["eval"]])
    kind = HistGradientBoostingRegressor if task == "regression" else HistGradientBoostingClassifier
    start = time.perf_counter()
    # The threads gbt fits with (trainer/tabular/gbt.py): on a busy 2-core machine OpenMP's
    # threads make a small fit take a minute instead of a second. Settings stay default.
    with threadpool_limits(1 if len(x_train) < SINGLE_THREAD_ROWS else None):
        predicted = kind().fit(x_train, y_train).predict(x_eval)
    seconds = time.perf_counter() - start
    if task == "regression":
        return {"rmse": float(np.sqrt(np.mean((predicted - y_eval) ** 2)))}, seconds
    # Balanced accuracy too: what an imbalanced table is blessed on (init sets it).
    recalls = [np.mean(predicted[y_eval == c] == c) for c in np.unique(y_eval)]
    return {
        "accuracy": float(np.mean(predicted == y_eval)),
        "balanced accuracy": float(np.mean(recalls)),
    }, seconds


def meets_target(task: str, ours: float, anchor: float) -> bool:
    if task == "regression":
        return ours <= RMSE_RATIO * anchor
    return ours >= anchor - ACCURACY_POINTS


def bench_table(table: Table, tmp: Path) -> dict:
    from pipeline.datasets import dataset_config

    home, data = tmp / "schema", tmp / "data"
    # Its own dataset name: the project's schema/ already has a `taxi`.
    name = f"{table.name}-quality"
    table.write(tmp / f"{name}.csv")
    _tfxp(home, "init", name, "--csv", str(tmp / f"{name}.csv"),
          "--label", table.label, "--data-root", str(data))  # fmt: skip
    config = dataset_config(name).replace(run_dir=str(tmp / "run"))
    if config.tabular.task != table.task:
        raise RuntimeError(
            f"{table.name}: tfxp init inferred {config.tabular.task}, not {table.task}"
        )
    metric = METRIC[table.task]
    ours = "gbt" if config.run_fn.endswith(".gbt.run_fn") else "mlp"
    runs = {ours: _run(config)}
    other = "mlp" if ours == "gbt" else "gbt"
    splits = split_rows(config.pipeline_root)
    _use_model(home / name / "dataset.yaml", other, sum(len(r) for r in splits.values()))
    runs[other] = _run(dataset_config(name).replace(run_dir=str(tmp / "run")))
    anchors, anchor_seconds = anchor_score(
        splits, config.tabular.features, config.label_key, table.task
    )
    # A table blessed on balanced accuracy (an imbalanced binary label: init's choice)
    # is compared on it; the others on accuracy or RMSE.
    shown = "rmse" if table.task == "regression" else "accuracy"
    if metric not in runs[ours][0] and "balanced_accuracy" in runs[ours][0]:
        metric, shown = "balanced_accuracy", "balanced accuracy"
    anchor = anchors[shown]
    result = {
        "about": table.about,
        "task": table.task,
        "rows": {name: len(rows) for name, rows in splits.items()},
        "metric": shown,
        "default_model": ours,
        "anchor": round(anchor, 4),
        "anchor_fit_seconds": round(anchor_seconds, 2),
    }
    for model in ("mlp", "gbt"):
        metrics, trainer_seconds, blessed = runs[model]
        value = metrics[metric]
        result[model] = {
            "value": round(value, 4),
            "vs_anchor": round(value / anchor, 3),
            "meets_target": meets_target(table.task, value, anchor),
            # The second run is judged against the first's model as its baseline.
            "blessed": blessed,
            "trainer_seconds": round(trainer_seconds, 1),
        }
    result["ours"] = result[ours]
    return result


def _print(result: dict) -> None:
    print(
        f"{'table':<15}{'metric':<9}{'ours':>5}{'mlp':>9}{'gbt':>9}{'anchor':>9}"
        f"{'mlp/anc':>9}{'gbt/anc':>9}  target(mlp, gbt)  rows train/eval"
    )
    mark = {True: "met", False: "MISSED"}
    for name, r in result["tables"].items():
        mlp, gbt = r["mlp"], r["gbt"]
        print(
            f"{name:<15}{r['metric']:<9}{r['default_model']:>5}{mlp['value']:>9.4f}"
            f"{gbt['value']:>9.4f}{r['anchor']:>9.4f}{mlp['vs_anchor']:>9.3f}"
            f"{gbt['vs_anchor']:>9.3f}  {mark[mlp['meets_target']]:>6}, "
            f"{mark[gbt['meets_target']]:<9}  {r['rows'].get('train')}/{r['rows'].get('eval')}"
        )
    n = len(result["tables"])
    print(
        f"target: accuracy at most {ACCURACY_POINTS * 100:.0f} point below the anchor's, "
        f"RMSE at most {100 * (RMSE_RATIO - 1):.0f}% above; met by ours (the model tfxp init "
        f"chose) on {result['ours_met']}/{n} tables, mlp {result['mlp_met']}/{n}, "
        f"gbt {result['gbt_met']}/{n}"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    names = [t.name for t in TABLES]
    p.add_argument("--tables", default=",".join(names), help=f"comma-separated, of {names}")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    chosen = [n for n in args.tables.split(",") if n]
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        p.error(f"unknown table(s) {unknown}; known: {names}")
    tables = {}
    for table in TABLES:
        if table.name in chosen:
            print(f"{table.name}: {table.about}", file=sys.stderr, flush=True)
            with tempfile.TemporaryDirectory(prefix=f"bench-quality-{table.name}-") as tmp:
                tables[table.name] = bench_table(table, Path(tmp))
            print(f"  {json.dumps(tables[table.name])}", file=sys.stderr, flush=True)
    result = {
        "tables": tables,
        **{
            f"{m}_met": sum(r[m]["meets_target"] for r in tables.values())
            for m in ("ours", "mlp", "gbt")
        },
        "targets": {"accuracy_points": ACCURACY_POINTS, "rmse_ratio": RMSE_RATIO},
        "cpus": os.cpu_count(),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip(),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
