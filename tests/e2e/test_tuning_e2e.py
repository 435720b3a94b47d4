"""A tuned pipeline: the Tuner searches a learning rate that matters, its two trials at once
in two worker processes, the Trainer takes the best trial, the tuned model is at least as good
as the default one, and a rerun is cached.

The default model is the shared `taxi_runs` fixture's first run: the same sample data
(same split), code and step budget, with the dataset file's fixed learning rate.
"""

from __future__ import annotations

import glob
import json
import re
from pathlib import Path

import pytest
from e2e_support import small_config, write_sample
from tensorboard_cli import tfxp_tensorboard  # tests/support/

from pipeline import node_ids
from pipeline.config import TuningOptions

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

TINY, DEFAULT = 1e-6, 0.003  # 1e-6 barely moves the weights in 40 steps


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    from tfxp.local.runner import run_local

    tmp = tmp_path_factory.mktemp("tuned")
    write_sample(tmp / "data")
    config = small_config(tmp).replace(
        tuning=TuningOptions(
            search_space={"learning_rate": {"choices": [TINY, DEFAULT]}},
            algorithm="random",
            max_trials=2,
            parallel_trials=2,
        )
    )
    first = run_local(config, printer=lambda _: None)
    again = run_local(config, printer=lambda _: None)
    return config, first, again


def _one(pattern: str) -> Path:
    found = glob.glob(pattern)
    assert len(found) == 1, (pattern, found)
    return Path(found[0])


def test_every_trial_is_recorded_and_the_tiny_rate_loses(tuned):
    config, first, _ = tuned
    assert node_ids.TUNER in first.executed
    trials = json.loads(
        _one(f"{config.pipeline_root}/Tuner/tuner_results/*/tuner_results.json").read_text()
    )
    by_rate = {t["learning_rate"]: t["score"] for t in trials}
    assert set(by_rate) == {TINY, DEFAULT}, trials
    # The score is the eval split's loss: the tiny rate clearly underfits.
    assert by_rate[TINY] > by_rate[DEFAULT] + 0.01, trials
    best = json.loads(
        _one(
            f"{config.pipeline_root}/Tuner/best_hyperparameters/*/best_hyperparameters.txt"
        ).read_text()
    )
    assert best["values"]["learning_rate"] == DEFAULT


def test_the_tuned_model_is_at_least_as_good_as_the_default(tuned, taxi_runs):
    _, first, _ = tuned
    default = taxi_runs.first
    assert first.metrics and default.metrics
    assert first.metrics["binary_accuracy"] >= default.metrics["binary_accuracy"], (
        first.metrics,
        default.metrics,
    )


def test_the_two_trials_ran_in_two_worker_processes(tuned):
    _, first, _ = tuned
    log = Path(first.log_path).read_text()
    assert "parallel trials: worker-0 (pid" in log, log[-3000:]
    scored = re.findall(r"trial (\d+) scored \S+ in (worker-\d) \(pid (\d+)\)", log)
    assert sorted(t for t, _, _ in scored) == ["0", "1"], scored
    assert len({pid for _, _, pid in scored}) == 2, scored
    # The workers' own output (Keras's progress) is in the run's log too.
    assert re.search(r"worker-\d: .*val_loss", log), log[-3000:]


def test_an_unchanged_rerun_is_cached_tuner_included(tuned):
    _, _, again = tuned
    states = {c.node_id: c.state for c in again.components}
    assert states[node_ids.TUNER] == "CACHED", states
    assert states[node_ids.TRAINER] == "CACHED", states
    assert again.executed == []


def test_runs_show_lists_the_trials(tuned):
    import contextlib
    import io

    from tfxp.cli import main

    config, first, _ = tuned
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["runs", "show", first.run_id, "--run-dir", config.run_dir])
    assert code == 0, err.getvalue()
    text = out.getvalue()
    assert "2 trial(s), best first" in text, text
    best, worst = [line for line in text.splitlines() if line.lstrip().startswith("trial ")]
    assert "learning_rate=0.003" in best and "learning_rate=1e-06" in worst, text


def _init_and_tune(tmp_path: Path, name: str, init: list[str], tuning: str, **settings):
    """`tfxp init NAME INIT...`, a `tuning:` block (its indented lines) added to the dataset
    file it wrote, and one local run of that dataset: (config, run summary)."""
    from test_tabular_e2e import dataset_path, tfxp

    from pipeline.datasets import dataset_config
    from tfxp.local.runner import run_local

    home = tmp_path / "schema"
    code, _, err = tfxp(home, "init", name, *init, "--data-root", str(tmp_path / "data"))
    assert code == 0, err
    dataset_file = home / name / "dataset.yaml"
    dataset_file.write_text(dataset_file.read_text() + "\ntuning:\n" + tuning)
    with dataset_path(home):
        config = dataset_config(name).replace(run_dir=str(tmp_path / "run"), **settings)
    return config, run_local(config, printer=lambda _: None)


def test_a_tfxp_init_dataset_is_tuned_by_the_generic_trainer(tmp_path):
    """The generic tabular trainer's search: layer sizes of a `tfxp init` table."""
    from data.tables import write_table

    write_table("wine", tmp_path / "wine.csv")
    init = ["--csv", str(tmp_path / "wine.csv"), "--label", "cultivar"]
    tuning = "  max_trials: 2\n  search_space:\n    hidden_units: {choices: [[8], [64, 32]]}\n"
    config, run = _init_and_tune(tmp_path, "wine", init, tuning)
    assert {node_ids.TUNER, node_ids.TRAINER} <= set(run.executed)
    trials = json.loads(
        _one(f"{config.pipeline_root}/Tuner/tuner_results/*/tuner_results.json").read_text()
    )
    assert sorted(t["hidden_units"] for t in trials) == ["64,32", "8"], trials
    # One process, trial after trial: each still gets its TensorBoard folder.
    logs = _one(f"{config.pipeline_root}/Tuner/tuner_results/*/tensorboard")
    assert sorted(p.name for p in logs.iterdir()) == ["trial-0", "trial-1"]
    assert all((logs / t / "validation").is_dir() for t in ("trial-0", "trial-1"))
    assert run.metrics["sparse_categorical_accuracy"] > 0.5, run.metrics


def test_a_sequence_dataset_is_tuned_by_the_sequence_trainer(tmp_path):
    """The sequence trainer's search: embedding width and learning rate of a `tfxp init`
    event table, its trials on the transformed SequenceExamples; the Trainer takes the
    best trial's values."""
    from data.sequences import write_events

    write_events(tmp_path / "events", 400, seed=5, files=1)
    init = [
        "--csv", str(tmp_path / "events" / "events-000.csv"), "--label", "converted",
        "--sequence-key", "session_id", "--order-by", "event_time", "--sequence-model", "conv",
    ]  # fmt: skip
    tuning = "  max_trials: 2\n  trial_steps: 20\n  search_space:\n"
    tuning += "    embedding_dim: {choices: [4, 16]}\n"
    config, run = _init_and_tune(tmp_path, "shop", init, tuning, train_steps=40)
    assert {node_ids.TUNER, node_ids.TRAINER} <= set(run.executed)
    trials = json.loads(
        _one(f"{config.pipeline_root}/Tuner/tuner_results/*/tuner_results.json").read_text()
    )
    by_dim = {t["embedding_dim"]: t["score"] for t in trials}
    assert sorted(by_dim) == [4, 16], trials
    best = json.loads(
        _one(
            f"{config.pipeline_root}/Tuner/best_hyperparameters/*/best_hyperparameters.txt"
        ).read_text()
    )["values"]
    assert best["embedding_dim"] == min(by_dim, key=by_dim.get), (best, trials)
    # The Trainer logged the hyperparameters it trained with: the best trial's.
    log = Path(run.log_path).read_text()
    trained = json.loads(re.search(r"sequence: .*; hyperparameters: (\{.*?\})", log).group(1))
    assert trained["embedding_dim"] == best["embedding_dim"], (trained, best)


def test_each_trial_writes_its_tensorboard_folder_the_console_and_tensorboard_show(tuned):
    """tuner_results/tensorboard/trial-<n>/ per trial (both ran in worker processes):
    train/ and validation/ with the loss, the trial's hyperparameters as text, read
    back from the event files; the model page charts each trial's last loss and serves
    the numbers (JSON, CSV), as it serves the Trainer's curves; `tfxp tensorboard`
    names both folders."""
    import tensorflow as tf
    from starlette.testclient import TestClient

    from metadata.store import location_from
    from tfxp.cli.tensorboard import logdir_flags, run_log_dir, trial_log_dir
    from tfxp.ui.app import create_app
    from tfxp.ui.browse import StoreBrowser

    config, first, _ = tuned
    folder = _one(f"{config.pipeline_root}/Tuner/tuner_results/*/tensorboard")
    assert sorted(p.name for p in folder.iterdir()) == ["trial-0", "trial-1"]
    rates = set()
    for trial in folder.iterdir():
        tags: dict[str, set] = {}
        texts = []
        for kind in ("train", "validation"):
            for events in (trial / kind).glob("*.tfevents.*"):
                for event in tf.compat.v1.train.summary_iterator(str(events)):
                    for value in event.summary.value:
                        tags.setdefault(kind, set()).add(value.tag)
                        if value.tag == "hyperparameters":
                            texts.append(tf.make_ndarray(value.tensor).item().decode())
        assert {"epoch_loss", "epoch_learning_rate"} <= tags["train"], tags
        assert "epoch_loss" in tags["validation"], tags
        (text,) = texts
        rates.add(re.search(r"\| learning_rate \| (\S+) \|", text).group(1))
    assert rates == {str(TINY), str(DEFAULT)}

    browser = StoreBrowser(location_from(run_dir=config.run_dir))
    client = TestClient(create_app(browser), base_url="http://127.0.0.1")
    lin = browser.lineage(config.pipeline_name)
    trainer = lin.run_execution(first.run_id, node_ids.TRAINER)
    (model,) = lin.outputs(trainer.id, "Model")
    page = client.get(f"/artifact/{model.id}").text
    assert 'id="chart-trials"' in page and 'id="data-trials"' in page
    assert 'id="data-curve-loss"' in page  # the Trainer's curves' data link
    trials = client.get(f"/artifact/{model.id}/scalars/trials.json").json()
    assert set(trials) == {f"trial-{n}/{k}" for n in (0, 1) for k in ("train", "validation")}
    assert "hyperparameters" not in trials["trial-0/train"]  # text: no point to chart
    csv_rows = client.get(f"/artifact/{model.id}/scalars/trainer.csv").text.splitlines()
    trainer_curves = client.get(f"/artifact/{model.id}/scalars/trainer.json").json()
    assert csv_rows[0] == "run,tag,step,value"
    assert len(csv_rows) - 1 == sum(len(p) for t in trainer_curves.values() for p in t.values())
    assert client.get(f"/artifact/{model.id}/scalars/nothing.json").status_code == 404

    _check_trials_in_chromium(config, model.id, trials)

    run_id, log_dir = run_log_dir(lin, first.run_id)
    assert trial_log_dir(lin, run_id) == str(folder)
    assert logdir_flags(log_dir, str(folder)) == [
        "--logdir_spec",
        f"trainer:{log_dir},tuner:{folder}",
    ]


def test_tfxp_tensorboard_serves_the_trainer_and_every_trial(tuned):
    """`tfxp tensorboard` on a tuned run: TensorBoard (on loopback) serves the Trainer's
    curves and each trial's, under the names it was given (trainer/, tuner/trial-<n>/)."""
    config, first, _ = tuned
    with tfxp_tensorboard(config.run_dir, first.run_id) as served:
        assert any("tuner trials' curves in" in line for line in served.lines), served.lines
        tags = served.json("data/plugin/scalars/tags")
    expected = {"trainer/train", "trainer/validation"} | {
        f"tuner/trial-{n}/{kind}" for n in (0, 1) for kind in ("train", "validation")
    }
    assert expected <= set(tags), sorted(tags)
    for run in expected:
        assert "epoch_loss" in tags[run], (run, tags[run])


def _check_trials_in_chromium(config, model_id: int, trials: dict) -> None:
    """The model page in headless Chromium: the trials chart drew each trial's last
    validation loss, its data link serves the same numbers, no console error."""
    from browser import console_errors, fetched, new_driver
    from selenium.webdriver.common.by import By
    from test_ui_browser import _drawn, serving

    with serving(Path(config.run_dir)) as base:
        driver = new_driver()
        try:
            driver.get(f"{base}/artifact/{model_id}")
            validation, train = _drawn(driver, "chart-trials")
            assert validation["x"] == ["trial-0", "trial-1"]
            for trace, kind in ((validation, "validation"), (train, "train")):
                expected = [trials[f"{t}/{kind}"]["epoch_loss"][-1][1] for t in trace["x"]]
                assert trace["y"] == pytest.approx(expected)
            link = driver.find_element(By.ID, "data-trials").get_attribute("href")
            text = fetched(driver, link)
            assert json.loads(text) == trials
            assert not console_errors(driver)
        finally:
            driver.quit()
