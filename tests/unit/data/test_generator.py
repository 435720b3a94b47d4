"""The data generator: deterministic, learned from the embedded data, drift that does what it says."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

from components.example_gen import csv_checks
from components.validation.schema_importer import load_schema, schema_column_types
from data import generate as g
from pipeline.datasets import dataset_config

ROWS = 30_000


@pytest.fixture(scope="module")
def model() -> g.TaxiModel:
    return g.TaxiModel()


@pytest.fixture(scope="module")
def source() -> pd.DataFrame:
    return pd.read_csv(g.EMBEDDED_CSV)


def _make(tmp_path, model, name="out", rows=ROWS, **kwargs) -> pd.DataFrame:
    files = g.generate(tmp_path / name, rows, model=model, **kwargs)
    return pd.concat([pd.read_csv(f, keep_default_na=False, na_values=[""]) for f in files])


def _digest(folder) -> str:
    h = hashlib.sha256()
    for f in sorted(folder.iterdir()):
        h.update(f.read_bytes())
    return h.hexdigest()


def test_same_seed_same_bytes(tmp_path, model):
    g.generate(tmp_path / "a", 5000, seed=3, model=model, rows_per_file=2000)
    g.generate(tmp_path / "b", 5000, seed=3, model=model, rows_per_file=2000)
    g.generate(tmp_path / "c", 5000, seed=4, model=model, rows_per_file=2000)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert _digest(tmp_path / "a") != _digest(tmp_path / "c")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [
        "part-00000.csv",
        "part-00001.csv",
        "part-00002.csv",
    ]


def test_output_passes_the_csv_checks(tmp_path, model):
    files = g.generate(tmp_path / "ok", 20_000, seed=1, model=model)
    columns = schema_column_types(load_schema(dataset_config("taxi").schema_file))
    assert csv_checks.check_csv_files([str(f) for f in files], columns) == 20_000


def test_distributions_follow_the_embedded_data(tmp_path, model, source):
    d = _make(tmp_path, model)
    assert list(d.columns) == list(source.columns)
    for col in ("fare", "trip_miles", "tips", "trip_start_hour"):
        assert d[col].median() == pytest.approx(source[col].median(), rel=0.15), col
    for col in ("company", "dropoff_census_tract", "dropoff_community_area"):
        assert d[col].isna().mean() == pytest.approx(source[col].isna().mean(), abs=0.02), col
    share = d.payment_type.value_counts(normalize=True)
    want = source.payment_type.value_counts(normalize=True)
    assert share["Cash"] == pytest.approx(want["Cash"], abs=0.02)
    # The label's dependence on payment type and fare survives.
    tipped = (d.tips > 0).groupby(d.payment_type).mean()
    assert tipped["Credit Card"] > 0.9 and tipped["Cash"] < 0.01
    card = d[d.payment_type == "Credit Card"]
    assert np.corrcoef(card.fare, card.tips)[0, 1] > 0.5
    assert d.fare.nunique() > source.fare.nunique()  # smoothed, not copied


def test_shift_and_scale(tmp_path, model):
    base = _make(tmp_path, model, "base", seed=5)
    shifted = _make(tmp_path, model, "shift", seed=5, drift=g.Drift(shift={"fare": 5.0}))
    assert shifted.fare.mean() - base.fare.mean() == pytest.approx(5.0, abs=0.1)
    scaled = _make(tmp_path, model, "scale", seed=5, drift=g.Drift(scale={"trip_miles": 2.0}))
    assert scaled.trip_miles.mean() / base.trip_miles.mean() == pytest.approx(2.0, rel=0.02)
    assert scaled.trip_miles.std() / base.trip_miles.std() == pytest.approx(2.0, rel=0.05)
    hours = _make(tmp_path, model, "hour", seed=5, drift=g.Drift(shift={"trip_start_hour": 30}))
    assert hours.trip_start_hour.between(0, 23).all() and (hours.trip_start_hour == 23).all()


def test_nulls(tmp_path, model):
    d = _make(tmp_path, model, drift=g.Drift(nulls={"fare": 0.2}))
    assert d.fare.isna().mean() == pytest.approx(0.2, abs=0.01)


def test_unseen_categories(tmp_path, model, source):
    d = _make(tmp_path, model, drift=g.Drift(unseen={"payment_type": 0.1}))
    new = ~d.payment_type.isin(set(source.payment_type))
    assert new.mean() == pytest.approx(0.1, abs=0.01)
    assert d.payment_type[new].str.startswith("unseen-payment_type-").all()
    with pytest.raises(ValueError, match="only text columns"):
        g.generate(tmp_path / "x", 10, model=model, drift=g.Drift(unseen={"fare": 0.1}))


def test_reweight_category_frequency(tmp_path, model, source):
    base = source.payment_type.value_counts(normalize=True)
    d = _make(tmp_path, model, drift=g.Drift(reweight={"payment_type": {"Credit Card": 3.0}}))
    card = base["Credit Card"]
    want = 3 * card / (3 * card + (1 - card))
    assert (d.payment_type == "Credit Card").mean() == pytest.approx(want, abs=0.015)


def test_bad_drift_flags(tmp_path, model):
    with pytest.raises(ValueError, match="unknown column"):
        g.generate(tmp_path / "x", 10, model=model, drift=g.Drift(shift={"nope": 1.0}))
    with pytest.raises(ValueError, match="not a numeric column"):
        g.generate(tmp_path / "x", 10, model=model, drift=g.Drift(scale={"company": 2.0}))
    with pytest.raises(ValueError, match="does not occur"):
        g.generate(
            tmp_path / "x", 10, model=model, drift=g.Drift(reweight={"payment_type": {"Gold": 2}})
        )
