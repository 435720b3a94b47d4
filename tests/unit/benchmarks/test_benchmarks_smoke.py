"""Every benchmark still runs: each on tiny sizes (the numbers are meaningless; the code paths are not).

Benchmarks are not tests (they measure, they do not assert targets), but a
benchmark nobody runs rots. These run each one end to end where that takes
seconds, and otherwise its argument parsing, its checks of what it depends
on and its report (the whole-pipeline ones: `taxi_vs_tfx_example.py` runs
three pipelines, `object_storage.py` two plus a server; its ingest mode runs
end to end on a few rows). Smoke runs take the benchmarks' smoke flags
(`--one-child`, `--no-warmup`): each code path still runs once, without a second
Python/TFX start-up (~10 s of CPU) or a warm-up whose numbers nobody reads.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from benchmark_scripts import BENCHMARKS, load_benchmark, run_benchmark  # tests/support/


@pytest.mark.parametrize("script", sorted(p.name for p in BENCHMARKS.glob("*.py")))
def test_every_benchmark_parses_its_arguments(script):
    assert "usage:" in run_benchmark(None, script, "--help").stdout


def test_taxi_benchmark_checks_the_example_it_drives(forkserver):
    done = run_benchmark(forkserver, "taxi_vs_tfx_example.py", "--check-example")
    assert "_create_pipeline, _pipeline_name, _beam_pipeline_args present" in done.stdout


def test_taxi_benchmark_fails_clearly_when_the_example_changes(tmp_path, monkeypatch):
    bench = load_benchmark("taxi_vs_tfx_example.py")
    fake = tmp_path / "tfx"
    example = fake / bench.EXAMPLE_REL_DIR
    (example / "data" / "simple").mkdir(parents=True)
    (example / "data" / "simple" / "data.csv").write_text("x\n")
    (example / bench.EXAMPLE_PIPELINE).write_text("def _create_pipeline(): pass\n")
    (example / bench.EXAMPLE_MODULE).write_text("x = 1\n")
    monkeypatch.setattr(bench, "_tfx_dir", lambda: fake)
    with pytest.raises(
        SystemExit, match=r"no longer defines \['_pipeline_name', '_beam_pipeline_args'\]"
    ):
        bench.check_example()


def test_taxi_benchmark_report_has_every_anchor_counts_and_examples_seen():
    bench = load_benchmark("taxi_vs_tfx_example.py")

    def result(name, wall, count, steps, batch, acc):
        r = bench.RunResult(name, wall, 0, "", "", binary_accuracy=acc, blessed=True, pushed=True)
        r.extra = {"metrics": {"example_count": count}, "train_steps": steps, "train_batch": batch}
        return r

    ours = result("ours", 30.0, 4966, 200, 256, 0.885)
    anchors = {
        "example": result("example", 150.0, 4966, 1000, 40, 0.78),
        "example_inprocess": result("example_inprocess", 100.0, 4966, 1000, 40, 0.78),
        "example_fnapi": result("example_fnapi", 120.0, 4966, 1000, 40, 0.78),
    }
    verdict = bench.compare(ours, anchors)
    # The headline is the faster in-process configuration, whichever it is.
    assert verdict["headline_anchor"] == "example_inprocess"
    assert verdict["wall_ratio"] == verdict["wall_ratio_vs_example_inprocess"] == 0.3
    assert verdict["wall_ratio_vs_example"] == 0.2
    assert verdict["wall_ratio_vs_example_fnapi"] == 0.25
    assert verdict["eval_counts_equal"] is True
    assert verdict["training_examples_seen"] == {
        "ours": 51200,
        "example": 40000,
        "example_inprocess": 40000,
        "example_fnapi": 40000,
    }
    text = bench.render(ours, anchors, verdict, "ours-first")
    assert "0.300 (headline)" in text and "200 x 256 = 51,200" in text
    assert "0.250 " in text and "example in-process, FnApiRunner" in text
    anchors["example_fnapi"].wall_seconds = 60.0
    faster = bench.compare(ours, anchors)
    assert faster["headline_anchor"] == "example_fnapi" and faster["wall_ratio"] == 0.5
    anchors["example"].extra["metrics"]["example_count"] = 5000
    assert bench.compare(ours, anchors)["eval_counts_equal"] is False


def test_taxi_benchmark_anchor_arguments(tmp_path):
    """As shipped: the example's own Beam arguments; in-process: none; FnApiRunner: the
    runner named, with a dependency flag (an empty requirements file) so TFX builds no sdist."""
    bench = load_benchmark("taxi_vs_tfx_example.py")
    example = type("Example", (), {"_beam_pipeline_args": ["--direct_num_workers=0"]})
    assert bench._anchor_beam_args("example", example, tmp_path) == ["--direct_num_workers=0"]
    assert bench._anchor_beam_args("example_inprocess", example, tmp_path) == []
    runner, requirements = bench._anchor_beam_args("example_fnapi", example, tmp_path)
    assert runner == "--runner=FnApiRunner"
    assert requirements.startswith("--requirements_file=")
    assert Path(requirements.partition("=")[2]).read_text() == ""
    with pytest.raises(ValueError, match="unknown anchor 'example_x'"):
        bench.run_example(tmp_path, anchor="example_x")


def test_input_pipeline_benchmark_on_a_few_records(forkserver):
    done = run_benchmark(
        forkserver,
        "input_pipeline.py",
        *("--records", "3000", "--shards", "2", "--repeats", "1", "--workers", "1", "--json"),
    )
    report = json.loads(done.stdout)
    assert set(report["results"]) >= {"a", "b", "c", "d", "t", "e"}
    assert report["results"]["t"]["cold_records_per_s"] > 0
    assert {"d/c", "t_cold/c", "t_warm/c", "t_warm/t_bytes_warm"} <= set(report["ratios"])
    # The training configuration's stages add up to its warm pass.
    parts = report["training_breakdown"]
    t = report["results"]["t"]
    assert sum(parts["warm"].values()) == pytest.approx(1e6 / t["records_per_s"], abs=0.01)
    assert sum(parts["cold"].values()) == pytest.approx(1e6 / t["cold_records_per_s"], abs=0.01)


def test_input_pipeline_training_row_is_what_the_trainer_passes():
    from trainer.base import Hyperparameters

    settings = load_benchmark("input_pipeline.py").trainer_training_settings()
    hp = Hyperparameters()
    assert settings["shuffle"] is True
    assert (settings["cache"], settings["deterministic"], settings["seed"]) == (
        hp.cache,
        hp.deterministic,
        hp.seed,
    )
    assert (settings["shuffle_buffer"], settings["shuffle_block"]) == (
        hp.shuffle_buffer,
        hp.shuffle_block,
    )


def test_generator_benchmark_on_a_few_rows(forkserver):
    done = run_benchmark(
        forkserver, "generator.py", "--rows", "2000", "--ingest-rows", "0", "--json"
    )
    assert "rows_per_s" in done.stdout


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_csv_ingest_benchmark_on_a_few_rows(tmp_path, forkserver):
    done = run_benchmark(
        forkserver,
        "csv_ingest.py",
        "--rows",
        "300",
        "--work",
        str(tmp_path),
        "--one-child",
        "--json",
        timeout=800,
    )
    assert "| arrow |" in done.stdout and "| tfx |" in done.stdout
    assert "equivalent: yes" in done.stdout
    # --json (what benchmarks/record.py keeps): the same verdict, and both readers' figures
    report = json.loads(done.stdout[done.stdout.rindex("\n{") :])
    assert report["equivalent"] is True and report["rows"] == 300
    assert set(report["readers"]) == {"arrow", "tfx"} and report["speedup_executor"] > 0


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_tuning_benchmark_on_a_few_rows(forkserver):
    """Both searches of benchmarks/tuning.py on 2,000 rows, 2 trials of 3 steps: the same
    trials scored (so the same best loss) sequentially and by 2 worker processes."""
    done = run_benchmark(
        forkserver,
        "tuning.py",
        *("--rows", "2000", "--trials", "2", "--trial-steps", "3", "--parallel", "2", "--json"),
        timeout=800,
    )
    report = json.loads(done.stdout)
    sequential, parallel = report["results"]["sequential"], report["results"]["parallel"]
    assert (sequential["parallel_trials"], parallel["parallel_trials"]) == (1, 2)
    assert sequential["trials"] == parallel["trials"] == 2
    assert sequential["best_eval_loss"] == pytest.approx(parallel["best_eval_loss"], abs=1e-3)
    assert report["parallel_vs_sequential"] > 0


def test_peak_rss_sees_a_child_process_memory(tmp_path):
    """The sampler keeps the peak of a grandchild (Beam's workers are children of the run)."""
    bench = load_benchmark("taxi_vs_tfx_example.py")
    code = (
        "import subprocess, sys; subprocess.run([sys.executable, '-c', "
        "'b = bytearray(300 * 1024 * 1024); import time; time.sleep(1.5)'])"
    )
    result = bench._run_timed("rss", [sys.executable, "-c", code], tmp_path, tmp_path, timeout=60)
    assert result.returncode == 0
    assert result.extra["peak_rss_mb_max_process"] >= 300
    assert result.extra["processes_seen"] >= 2


def test_scale_benchmark_summary_picks_the_faster_anchor_and_reports_growth():
    bench = load_benchmark("taxi_vs_tfx_example.py")
    scale = load_benchmark("scale.py")

    def result(name, wall, acc, rss):
        r = bench.RunResult(name, wall, 0, "", "", binary_accuracy=acc)
        r.extra = {"metrics": {"example_count": 333}, "peak_rss_mb_max_process": rss}
        r.components = [{"node_id": "Transform", "state": "COMPLETE", "seconds": wall / 3}]
        return r

    def size(rows, ours, shipped, inproc):
        return scale.summarize(
            rows,
            {
                "ours": result("ours", ours, 0.80, 1500.0),
                "example": result("example", shipped, 0.79, 3500.0),
                "example_inprocess": result("example_inprocess", inproc, 0.79, 1200.0),
            },
        )

    small, large = size(100_000, 50.0, 150.0, 100.0), size(1_000_000, 400.0, 500.0, 1000.0)
    assert large["best_anchor"] == "example" and large["ratio_vs_best"] == 0.8
    assert large["ratio_met"] is False and large["accuracy_met"] is True
    assert large["ours_rss_met"] is True and large["eval_counts_equal"] is True
    assert small["best_anchor"] == "example_inprocess" and small["ratio_vs_best"] == 0.5
    text = scale.render_size(large)
    assert "ours / best anchor (example): 0.800" in text and "1,000,000 rows" in text
    growth = scale.render_growth([small, large])
    assert "ours               time x8.00" in growth
    # Rounds back to back: the median round's figures, every round's verdict.
    rounds = [size(1_000_000, ours, 1000.0, 2000.0) for ours in (240.0, 260.0, 230.0)]
    combined = scale.combine_rounds(rounds)
    assert combined["ratio_vs_best"] == 0.24 and combined["ratio_target"] == 0.25
    assert [r["ratio_met"] for r in combined["rounds"]] == [True, False, True]
    assert combined["ratio_met_every_round"] is False
    assert "0.240, 0.260, 0.230 (target met in every round: MISSED)" in scale.render_size(combined)


def test_scale_benchmark_alone_reports_ours_and_the_driver_per_component(tmp_path):
    bench = load_benchmark("taxi_vs_tfx_example.py")
    scale = load_benchmark("scale.py")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "run.log").write_text(
        "2026-12-04 10:00:00,000 INFO absl: Component CsvExampleGen is running.\n"
        "2026-12-04 10:00:02,500 INFO absl: Component CsvExampleGen is finished.\n"
        "2026-12-04 10:00:03,000 INFO absl: Component Evaluator is running.\n"
        "2026-12-04 10:00:05,000 INFO absl: Component Evaluator is finished.\n"
    )
    t0 = time.mktime(time.strptime("2026-12-04 10:00:00", "%Y-%m-%d %H:%M:%S"))
    mb = 1024 * 1024
    timeline = [(t0 - 1, 500 * mb), (t0 + 1, 800 * mb), (t0 + 2.9, 700 * mb), (t0 + 4, 1900 * mb)]
    peaks = bench.driver_peaks(timeline, logs)
    assert peaks == {
        "CsvExampleGen": {"peak": 800.0, "rise": 300.0},
        "Evaluator": {"peak": 1900.0, "rise": 1200.0},
    }
    ours = bench.RunResult("ours", 40.0, 0, "", "", binary_accuracy=0.9)
    ours.extra = {
        "metrics": {"example_count": 333},
        "peak_rss_mb_max_process": 1900.0,
        "peak_rss_mb_driver_by_component": peaks,
        "peak_rss_mb_by_process": [{"pid": 1, "name": "local_runner.py", "mb": 1900.0}],
    }
    ours.components = [{"node_id": "Evaluator", "state": "COMPLETE", "seconds": 2.0}]
    summary = scale.summarize(1_000_000, {"ours": ours})
    assert summary["best_anchor"] is None and summary["ratio_vs_best"] is None
    assert summary["ours_rss_met"] is False
    text = scale.render_size(scale.combine_rounds([summary]))
    assert "ours alone (--anchor none)" in text and "MISSED" in text
    assert "local_runner.py 1900" in text and "1900 (+1200)" in text


def test_digits_benchmark_checks_the_mnist_example_it_drives(forkserver):
    done = run_benchmark(forkserver, "digits_vs_tfx_mnist.py", "--check-example")
    assert "_create_pipeline, _pipeline_name, _beam_pipeline_args present" in done.stdout
    assert "training batch 40" in done.stdout
    assert "'input_shape=(784,)' -> 'input_shape=(64,)'" in done.stdout


def test_digits_benchmark_stops_when_the_module_edit_does_not_apply(tmp_path, monkeypatch):
    """The 784 -> 64 edit must apply exactly once: a changed example stops the benchmark."""
    bench = load_benchmark("digits_vs_tfx_mnist.py")
    fake = tmp_path / "tfx"
    example = fake / bench.EXAMPLE_REL_DIR
    example.mkdir(parents=True)
    installed = bench.taxi._tfx_dir() / bench.EXAMPLE_REL_DIR
    for name in (bench.EXAMPLE_PIPELINE, bench.EXAMPLE_MODULE):
        (example / name).write_text((installed / name).read_text())
    base = (installed / bench.EXAMPLE_BASE).read_text()
    (example / bench.EXAMPLE_BASE).write_text(base.replace("(784,)", "(28, 28)"))
    monkeypatch.setattr(bench.taxi, "_tfx_dir", lambda: fake)
    with pytest.raises(SystemExit, match=r"0 occurrences of 'input_shape=\(784,\)'"):
        bench.check_example()


def test_digits_benchmark_summary_reports_every_round_and_the_median():
    bench = load_benchmark("digits_vs_tfx_mnist.py")
    render_results = load_benchmark("render_results.py")

    def result(name, wall, acc, count, steps, batch):
        r = bench.taxi.RunResult(name, wall, 0, "", "", blessed=True)
        r.extra = {
            "metrics": {"sparse_categorical_accuracy": acc, "example_count": count},
            "train_steps": steps,
            "train_batch": batch,
            "peak_rss_mb_max_process": 900.0,
        }
        r.components = [{"node_id": f"Trainer.{name}", "state": "COMPLETE", "seconds": wall / 2}]
        return r

    def round_(ours, inproc, fnapi):
        return bench.summarize(
            {
                "ours": result("ours", ours, 0.98, 593, 300, 64),
                "example_inprocess": result("example_inprocess", inproc, 0.97, 595, 5000, 40),
                "example_fnapi": result("example_fnapi", fnapi, 0.97, 595, 5000, 40),
            }
        )

    first = round_(25.0, 50.0, 40.0)
    assert first["best_anchor"] == "example_fnapi" and first["ratio_vs_best"] == 0.625
    assert first["ratios"] == {"example_inprocess": 0.5, "example_fnapi": 0.625}
    # The eval sets differ (each side hashes its own split): both counts, no verdict.
    assert first["eval_example_counts"] == {
        "ours": 593,
        "example_inprocess": 595,
        "example_fnapi": 595,
    }
    assert first["accuracies"]["ours"] == 0.98
    assert first["training_examples_seen"]["ours"] == 19_200
    assert first["training_examples_seen"]["example_fnapi"] == 200_000
    text = bench.render_round(first, "round 1")
    assert "300 x 64 = 19,200" in text and "5000 x 40 = 200,000" in text
    assert "ours / fastest anchor (example_fnapi): 0.625" in text
    assert "Trainer.ours" in text and "Trainer.example_fnapi" in text

    combined = bench.combine_rounds([first, round_(20.0, 40.0, 50.0), round_(30.0, 50.0, 60.0)])
    assert [r["ratio_vs_best"] for r in combined["rounds"]] == [0.625, 0.5, 0.6]
    assert combined["ratio_median"] == 0.6 and combined["median_round"] == 3
    assert combined["best_anchor"] == "example_inprocess"  # the median round's figures
    assert "median 0.600 (the median round: 3)" in bench.render_rounds(combined)
    page = "\n".join(render_results.render_digits_pipeline(json.loads(json.dumps(combined))))
    assert "0.625 (example in-process, FnApiRunner named), 0.500" in page
    assert "median **0.600**" in page and "| eval examples | 593 | 595 | 595 |" in page
    assert "5000 x 40 = 200,000" in page and "| Trainer.ours | 15.0 | n/a | n/a |" in page


def test_digits_eval_report_prints_fast_over_tfma_per_variant(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # it imports slicing_cost's helpers
    bench = load_benchmark("digits_eval.py")
    seconds = {
        "first run, fast": [2.0, 1.0],
        "first run, tfma": [4.0, 5.0],
        "against a baseline, fast": [1.5],
        "against a baseline, tfma": [6.0],
    }
    ratios = bench._report(seconds)
    assert ratios == {"first run: fast / tfma": 0.25, "against a baseline: fast / tfma": 0.25}
    printed = capsys.readouterr().out
    assert "first run: fast / tfma" in printed and "0.250" in printed


@pytest.mark.timeout(600)
def test_beam_speedups_benchmark_to_the_statistics_on_a_few_rows(forkserver):
    done = run_benchmark(
        forkserver,
        "beam_speedups.py", "--rows", "200", "--repeat", "1", "--to-node", "StatisticsGen",
        "--no-warmup", timeout=500,
    )  # fmt: skip
    assert "StatisticsGen" in done.stdout
    assert "ratio with / without the caches, whole run:" in done.stdout


@pytest.mark.parametrize("one_child", [False, True])
def test_csv_ingest_runs_each_reader_in_a_fresh_child_unless_one_child(
    tmp_path, monkeypatch, capsys, one_child
):
    """The smoke test takes --one-child; without it (measuring) each reader gets its own process."""
    bench = load_benchmark("csv_ingest.py")
    (tmp_path / "data" / "span-1").mkdir(parents=True)
    (tmp_path / "data" / "span-1" / "data.csv").write_text("x\n1\n")
    splits = {"Split-train": [2, "ab", 1, 10]}
    children = []

    def child(args):
        if args[1] == bench.DIGEST:
            return 1.0, 1.0, json.dumps({run_dir: splits for run_dir in args[2:]})
        sides = args[2:]
        children.append(sides[::3])
        timed = {"do": 1.0, "do_cpu": 1.0, "component": 1.0, "rows": 1}
        return 2.0, 100.0, "\n".join(json.dumps({**timed, "reader": r}) for r in sides[::3])

    monkeypatch.setattr(bench, "_child", child)
    argv = ["csv_ingest.py", "--rows", "1", "--work", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", argv + ["--one-child"] * one_child)
    with pytest.raises(SystemExit) as exited:
        bench.main()
    assert exited.value.code == 0
    assert children == ([["arrow", "tfx"]] if one_child else [["arrow"], ["tfx"]])
    assert ("not a measurement" in capsys.readouterr().out) is one_child


def test_ui_benchmark_runs_end_to_end(tmp_path):
    """benchmarks/ui.py on 6 runs: the store is written, every page timed, the JSON printed."""
    done = run_benchmark(
        None,
        "ui.py",
        "--runs",
        "6",
        "--requests",
        "2",
        "--work",
        str(tmp_path / "w"),
        "--json",
    )
    assert "runs page" in done.stdout and "anchor" in done.stdout
    figures = json.loads(done.stdout[done.stdout.rindex("\n{") :])
    assert figures["runs"] == 6 and figures["pages"]["run page"]["p95_ms"] > 0
