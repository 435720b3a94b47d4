"""`tfxp init`: inference from a CSV, the files it writes, and bad input (nothing written)."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from pipeline.datasets import DATASET_PATH_ENV, load_dataset_file
from pipeline.headers import feature_name
from tfxp.init.command import run_init
from tfxp.init.profile import InitError, check_files, infer

ROWS = 40


def _csv(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


def table(path: Path) -> Path:
    """id (unique), size (float, blanks), colour (strings, blanks), rooms (few ints), label."""
    rows = []
    for i in range(ROWS):
        size = "" if i % 7 == 0 else f"{i * 1.5:.1f}"
        colour = "" if i % 9 == 0 else ["red", "green", "blue"][i % 3]
        rows.append(f"{i},{size},{colour},{i % 4},{['yes', 'no'][i % 2]},{i * 2.5:.2f}")
    return _csv(path, "id,size,colour,rooms,bought,price", rows)


def _args(tmp_path: Path, name: str, csv: list[Path], label: str, **kw) -> argparse.Namespace:
    defaults = dict(task=None, exclude=None, link=False, force=False)
    return argparse.Namespace(
        name=name,
        csv=[str(c) for c in csv],
        label=label,
        data_root=str(tmp_path / "data" / name),
        **{**defaults, **kw},
    )


@pytest.fixture()
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(DATASET_PATH_ENV, str(tmp_path / "schema"))
    return tmp_path / "schema"


def _infer(path: Path, label: str, **kw):
    files, header = check_files([str(path)])
    inferred, _ = infer("t", files, header, label, **kw)
    return inferred


def test_types_treatments_and_task_are_inferred(tmp_path):
    inferred = _infer(table(tmp_path / "t.csv"), "bought")
    by = {c.name: c for c in inferred.columns}
    assert inferred.task == "binary" and inferred.classes == ["no", "yes"]
    assert inferred.majority == 0.5
    assert (by["id"].kind, by["id"].treatment) == ("INT", "excluded")  # unique per row: an id
    assert (by["size"].kind, by["size"].treatment, by["size"].missing) == ("FLOAT", "zscore", 6)
    assert (by["colour"].kind, by["colour"].treatment) == ("BYTES", "vocabulary")
    assert (by["rooms"].kind, by["rooms"].treatment) == ("INT", "vocabulary")  # 4 values
    assert _infer(tmp_path / "t.csv", "rooms").task == "multiclass"
    regression = _infer(tmp_path / "t.csv", "price")
    assert regression.task == "regression" and regression.label_std > 0


def test_invalid_column_names_are_renamed():
    assert feature_name("mean radius") == "mean_radius"
    assert feature_name("od280/od315") == "od280_od315"
    assert feature_name("2nd") == "c_2nd"


def test_init_writes_schema_thresholds_and_dataset_file(tmp_path, home):
    path = _csv(
        tmp_path / "t.csv",
        "mean radius,colour,kind",
        [f"{i / 3:.3f},{['red', 'blue'][i % 2]},{['a', 'b', 'c'][i % 3]}" for i in range(ROWS)],
    )
    out = io.StringIO()
    assert run_init(_args(tmp_path, "shop", [path], "kind"), out=out) == 0
    text = out.getvalue()
    assert "'mean radius' is not a valid feature name" in text and "'mean_radius'" in text
    assert "next: tfxp run --dataset shop" in text
    assert "mean_radius  FLOAT  zscore" in text
    span = tmp_path / "data" / "shop" / "span-1" / "t.csv"
    assert span.read_text().splitlines()[0] == "mean_radius,colour,kind"
    config = load_dataset_file(home / "shop" / "dataset.yaml")
    assert config.tabular.task == "multiclass" and config.tabular.classes == ("a", "b", "c")
    assert config.thresholds.lower_bound == pytest.approx(0.35)  # the majority class's share
    assert config.data_root == str(tmp_path / "data" / "shop")
    # The suggested slicing: the categorical feature with few values, judged by drop.
    assert config.slicing.by == (("colour",),)
    assert config.slicing.max_drop == 0.1 and config.slicing.min_examples >= 20
    schema = (home / "shop" / "schema.pbtxt").read_text()
    assert 'default_environment: "TRAINING"' in schema and 'not_in_environment: "SERVING"' in schema
    assert (home / "shop" / "validation.yaml").exists()

    # The name exists now: refused without --force; --force rewrites init's files, not the data.
    with pytest.raises(InitError, match="exists"):
        run_init(_args(tmp_path, "shop", [path], "kind"), out=io.StringIO())
    assert run_init(_args(tmp_path, "shop", [path], "colour", force=True), out=io.StringIO()) == 0
    rewritten = load_dataset_file(home / "shop" / "dataset.yaml")
    assert rewritten.tabular.task == "binary"
    # colour is the label now: kind (3 values) is the slicing.
    assert rewritten.slicing.by == (("kind",),)
    assert sorted(p.name for p in (tmp_path / "data" / "shop").iterdir()) == ["span-1"]


@pytest.mark.parametrize(
    "header, rows, label, task, message",
    [
        ("a,b", ["1,x", "2,y"] * 10, "c", None, "label column 'c' is not in"),
        ("a,b", ["1,x"] * 20, "b", None, "single value"),
        ("a,b", [f"{i},{'xyz'[i % 3]}" for i in range(20)], "b", "regression", "must be numeric"),
        ("1.5,2", ["1,2"] * 20, "2", None, "looks like data, not a header"),
        ("a,b", [f"{i},{'xyz'[i % 3]}" for i in range(20)], "b", "binary", "has 3 values"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(
    tmp_path, home, header, rows, label, task, message
):
    path = _csv(tmp_path / "in.csv", header, rows)
    with pytest.raises(InitError, match=message):
        run_init(_args(tmp_path, "bad", [path], label, task=task), out=io.StringIO())
    assert not home.exists()
    assert not (tmp_path / "data").exists()


def test_cli_reports_errors_without_a_traceback(tmp_path, home, capsys):
    from tfxp.cli import main

    path = _csv(tmp_path / "in.csv", "a,b", ["1,x", "2,y"] * 10)
    assert main(["init", "bad", "--csv", str(path), "--label", "nope"]) == 1
    err = capsys.readouterr().err
    assert "ERROR: label column 'nope' is not in" in err and "nothing was written" in err


def test_link_and_exclude(tmp_path, home):
    path = table(tmp_path / "t.csv")
    args = _args(tmp_path, "linked", [path], "bought", link=True, exclude=["rooms"])
    assert run_init(args, out=io.StringIO()) == 0
    span_file = tmp_path / "data" / "linked" / "span-1" / "t.csv"
    assert span_file.is_symlink() and span_file.resolve() == path.resolve()
    features = load_dataset_file(home / "linked" / "dataset.yaml").tabular.features
    assert "rooms" not in features and "id" not in features and "size" in features


def test_link_refuses_files_whose_header_must_be_renamed(tmp_path, home):
    path = _csv(tmp_path / "t.csv", "a b,y", [f"{i % 5},{'xy'[i % 2]}" for i in range(20)])
    with pytest.raises(InitError, match="--link"):
        run_init(_args(tmp_path, "x", [path], "y", link=True), out=io.StringIO())
    assert not home.exists()


def test_data_add_maps_original_column_names_to_the_renamed_ones(tmp_path, home, capsys):
    from tfxp.cli import main

    header = "mean radius,colour,kind"
    rows = [f"{i / 3:.3f},{['red', 'blue'][i % 2]},{['a', 'b', 'c'][i % 3]}" for i in range(ROWS)]
    path = _csv(tmp_path / "t.csv", header, rows)
    assert run_init(_args(tmp_path, "shop", [path], "kind"), out=io.StringIO()) == 0
    drop = _csv(tmp_path / "drop.csv", header, rows[:10])
    assert main(["data", "add", "shop", str(drop)]) == 0, capsys.readouterr().err
    span = tmp_path / "data" / "shop" / "span-2" / "drop.csv"
    assert span.read_text().splitlines()[0] == "mean_radius,colour,kind"
    assert drop.read_text().splitlines()[0] == header  # the user's file is untouched


def test_data_generate_resamples_the_datasets_own_rows_with_drift(tmp_path, home, capsys):
    from tfxp.cli import main

    path = table(tmp_path / "t.csv")
    assert run_init(_args(tmp_path, "gen", [path], "bought"), out=io.StringIO()) == 0
    code = main(["data", "generate", "gen", "--rows", "100", "--nulls", "colour=0.5"])
    assert code == 0, capsys.readouterr().err
    (part,) = (tmp_path / "data" / "gen" / "span-2").glob("*.csv")
    lines = part.read_text().splitlines()
    assert lines[0] == "id,size,colour,rooms,bought,price" and len(lines) == 101
    source = {tuple(r.split(",")) for r in path.read_text().splitlines()[1:]}
    rows = [tuple(r.split(",")) for r in lines[1:]]
    # Whole rows of the source (the label's relation kept), colour blanked for about half.
    assert all((r[:2] + ("",) + r[3:]) in {s[:2] + ("",) + s[3:] for s in source} for r in rows)
    assert 25 < sum(r[2] == "" for r in rows) < 75


def test_force_never_rewrites_a_dataset_init_did_not_write(tmp_path, home):
    path = table(tmp_path / "t.csv")
    with pytest.raises(InitError, match="not written by `tfxp init`"):
        run_init(_args(tmp_path, "taxi", [path], "bought", force=True), out=io.StringIO())
    assert not home.exists() and not (tmp_path / "data").exists()
