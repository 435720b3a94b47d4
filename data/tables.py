"""Tables the tests and benchmarks share, written as CSV (no test code: benchmarks/
imports them too).

- `write_table`: a table scikit-learn ships (wine, breast cancer, diabetes) with a
  string column and blank cells added;
- `write_cars`: a cars-like table as it comes (blank labels, an ISO date, a
  near-unique name, free text);
- `write_sample`: the first rows of the embedded taxi span as span 1 of a dataset,
  and `small_config`, the taxi config that runs it quickly.
"""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_ROWS = 3000
EMBEDDED_CSV = PROJECT_ROOT / "data" / "taxi" / "span-1" / "data.csv"

# name -> (scikit-learn loader, label column, label values' names or None, task)
CASES = {
    "wine": ("load_wine", "cultivar", {0: "barolo", 1: "grignolino", 2: "barbera"}, "multiclass"),
    "wine-int": ("load_wine", "cultivar", None, "multiclass"),
    "cancer": ("load_breast_cancer", "diagnosis", {0: "malignant", 1: "benign"}, "binary"),
    "diabetes": ("load_diabetes", "progression", None, "regression"),
}


def write_table(name: str, path: Path) -> tuple[list[str], list]:
    """The scikit-learn table as CSV, plus a string column and blank cells; returns (header, labels)."""
    import sklearn.datasets

    loader, label, names, _ = CASES[name]
    data = getattr(sklearn.datasets, loader)()
    rng = np.random.default_rng(7)
    x = data.data
    y = [
        names[int(v)] if names else (int(v) if name != "diabetes" else float(v))
        for v in data.target
    ]
    header = [*data.feature_names, "site", label]
    site = rng.choice(["north", "south", "east"], len(y))
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for i in range(len(y)):
            cells = [f"{v:.6g}" for v in x[i]]
            if rng.random() < 0.1:
                cells[0] = ""  # blank numeric cell: mean + is-missing indicator
            writer.writerow([*cells, "" if rng.random() < 0.05 else site[i], y[i]])
    return header, y


# The cars-like table: rows, how many have a blank label, and the words it is made of.
ROWS = 406
UNLABELLED = 8
BRANDS = ["chevrolet", "ford", "toyota", "datsun", "vw", "fiat", "peugeot", "honda", "amc"]
MODELS = ["malibu", "torino", "corolla", "pinto", "rabbit", "civic", "hornet", "504", "fury"]
WORDS = ["smooth", "ride", "rusty", "good", "engine", "family", "car", "new", "tires", "loud"]


def write_cars(path: Path, seed: int = 3) -> list[dict]:
    """The table; returns its rows (the label as written, blank for the unlabelled ones)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(ROWS):
        cylinders = int(rng.choice([4, 6, 8], p=[0.5, 0.25, 0.25]))
        weight = 1500 + 450 * cylinders + rng.normal(0, 250)
        horsepower = 20 + 14 * cylinders + rng.normal(0, 10)
        year = int(rng.integers(1970, 1983))
        origin = "usa" if cylinders == 8 else str(rng.choice(["usa", "europe", "japan"]))
        mpg = 46 - 0.0065 * weight - 0.05 * horsepower + 0.75 * (year - 1970)
        mpg += rng.normal(0, 1.5)
        name = f"{rng.choice(BRANDS)} {rng.choice(MODELS)} {rng.integers(1, 6)}"  # ~64% distinct
        comment = " ".join(rng.choice(WORDS, size=int(rng.integers(5, 10))))
        comment = "" if i % 37 == 5 else comment  # a blank text: no words, not NaN
        rows.append(
            {
                "MPG": "" if i % (ROWS // UNLABELLED) == 7 else f"{mpg:.1f}",
                "Cylinders": cylinders,
                "Horsepower": "" if i % 50 == 3 else f"{horsepower:.0f}",
                "Weight": f"{weight:.0f}",
                "Year": f"{year}-01-01",
                "Origin": origin,
                "Name": name,
                "Comment": comment,
            }
        )
    if sum(r["MPG"] == "" for r in rows) != UNLABELLED:  # the table promises this many
        raise RuntimeError(f"the cars table lost its {UNLABELLED} unlabelled rows")
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return rows


def write_sample(data_root: Path, rows: int = SAMPLE_ROWS) -> Path:
    """The embedded CSV's header and first `rows` rows, as span 1 of a dataset."""
    span = data_root / "span-1"
    span.mkdir(parents=True)
    with EMBEDDED_CSV.open() as src, (span / "data.csv").open("w") as dst:
        dst.writelines(itertools.islice(src, rows + 1))
    return span / "data.csv"


def small_config(tmp: Path, **changes):
    """A config for quick whole runs: few steps, everything under `tmp`."""
    from pipeline.datasets import dataset_config

    return (
        dataset_config("taxi")
        .replace(
            data_root=str(tmp / "data"), run_dir=str(tmp / "run"), train_steps=40, eval_steps=2
        )
        .replace(**changes)
    )
