"""Model quality on tables: our tabular models against scikit-learn's HistGradientBoosting.

    .venv/bin/python benchmarks/tabular_quality.py [--tables taxi,wine,...] [--json]

What a user would otherwise reach for on a table is gradient boosting with
default settings. For each table of TABLES, one invocation:
  1. writes the table as CSV and runs what a user runs: `tfxp init` (no edit),
     then the whole pipeline with the model `init` wrote (`ours`, the default);
  2. switches the dataset file to `model: gbt` (and its hyperparameters to
     gbt's defaults) and runs again: ExampleGen and Transform are cached, the
     same rows are in each split;
  3. reads back the rows ExampleGen put in the train and eval splits (the
     Examples artifact's raw tf.Examples) and fits scikit-learn's
     HistGradientBoostingClassifier/Regressor with default settings (the
     `anchor`) on the train rows, over the same feature columns the dataset file
     uses (numbers as numbers, blanks as NaN; strings ordinal-encoded on the
     train rows, unseen values NaN), and scores it on the eval rows.
Ours are the Evaluator's metrics on the same eval rows. Reported per table:
accuracy (classification) or RMSE (regression) of ours, gbt and the anchor,
the ratio to the anchor, and whether the target holds: accuracy at most 1
point below the anchor's, RMSE at most 5% above it.

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
sys.path.insert(0, str(ROOT / "tests" / "e2e"))  # the e2e tests' sklearn tables
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
        from test_tabular_e2e import write_table

        write_table(name, path)

    return write


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


def _use_gbt(dataset_file: Path) -> None:
    """The dataset file with `model: gbt` and gbt's default hyperparameters (the MLP's removed)."""
    import yaml

    raw = yaml.safe_load(dataset_file.read_text())
    raw["model"] = "gbt"
    raw["hyperparameters"] = {}
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

    names = sorted(features)
    strings = [n for n in names if features[n]["treatment"] == "vocabulary"]

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
    predicted = kind().fit(x_train, y_train).predict(x_eval)
    seconds = time.perf_counter() - start
    if task == "regression":
        return float(np.sqrt(np.mean((predicted - y_eval) ** 2))), seconds
    return float(np.mean(predicted == y_eval)), seconds


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
    default_model, trainer_seconds, blessed = _run(config)
    _use_gbt(home / name / "dataset.yaml")
    gbt_model, gbt_seconds, gbt_blessed = _run(
        dataset_config(name).replace(run_dir=str(tmp / "run"))
    )
    splits = split_rows(config.pipeline_root)
    anchor, anchor_seconds = anchor_score(
        splits, config.tabular.features, config.label_key, table.task
    )
    ours, gbt = default_model[metric], gbt_model[metric]
    return {
        "about": table.about,
        "task": table.task,
        "rows": {name: len(rows) for name, rows in splits.items()},
        "metric": "rmse" if table.task == "regression" else "accuracy",
        "default_model": str(getattr(config, "model", None) or "mlp"),
        "ours": round(ours, 4),
        "gbt": round(gbt, 4),
        "anchor": round(anchor, 4),
        "ours_vs_anchor": round(ours / anchor, 3),
        "gbt_vs_anchor": round(gbt / anchor, 3),
        "ours_meets_target": meets_target(table.task, ours, anchor),
        "gbt_meets_target": meets_target(table.task, gbt, anchor),
        "blessed": {"ours": blessed, "gbt": gbt_blessed},
        "seconds": {
            "ours_trainer": round(trainer_seconds, 1),
            "gbt_trainer": round(gbt_seconds, 1),
            "anchor_fit": round(anchor_seconds, 2),
        },
    }


def _print(result: dict) -> None:
    print(
        f"{'table':<15}{'metric':<9}{'ours':>9}{'gbt':>9}{'anchor':>9}"
        f"{'ours/anc':>10}{'gbt/anc':>9}  target(ours, gbt)  rows train/eval"
    )
    for name, r in result["tables"].items():
        mark = lambda ok: "met" if ok else "MISSED"  # noqa: E731
        print(
            f"{name:<15}{r['metric']:<9}{r['ours']:>9.4f}{r['gbt']:>9.4f}{r['anchor']:>9.4f}"
            f"{r['ours_vs_anchor']:>10.3f}{r['gbt_vs_anchor']:>9.3f}  "
            f"{mark(r['ours_meets_target']):>6}, {mark(r['gbt_meets_target']):<9}  "
            f"{r['rows'].get('train')}/{r['rows'].get('eval')}"
        )
    print(
        f"target: accuracy at most {ACCURACY_POINTS * 100:.0f} point below the anchor's, "
        f"RMSE at most {100 * (RMSE_RATIO - 1):.0f}% above; "
        f"ours met it on {result['ours_met']}/{len(result['tables'])} tables, "
        f"gbt on {result['gbt_met']}/{len(result['tables'])}"
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
        "ours_met": sum(r["ours_meets_target"] for r in tables.values()),
        "gbt_met": sum(r["gbt_meets_target"] for r in tables.values()),
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
