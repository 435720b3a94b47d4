"""Hyperparameter tuning: the dataset file's `tuning:` (pipeline/datasets.py), the Tuner
node (pipeline/definition.py) and the shared search pieces (trainer/tuning.py, trainer/base.py).
Nothing here trains; tests/e2e/test_tuning_e2e.py runs a search."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import keras_tuner as kt
import pytest

from pipeline import node_ids
from pipeline.dataset_sections import DatasetFileError
from pipeline.datasets import dataset_config, load_dataset_file
from pipeline.definition import create_pipeline
from pipeline.fingerprint import code_fingerprint, defines
from pipeline.plan import plan_run
from trainer.base import Hyperparameters, tuned_values
from trainer.tuning import declare, trial_hyperparameters

TAXI = (Path(__file__).resolve().parents[3] / "schema" / "taxi" / "dataset.yaml").read_text()

GOOD = """
tuning:
  algorithm: bayesian
  max_trials: 3
  max_minutes: 2.5
  trial_steps: 20
  search_space:
    learning_rate: {min: 0.0001, max: 0.03, sampling: log}
    batch_size: {choices: [32, 128]}
    hidden_units: {choices: [[64, 32], [16]]}
    train_steps: {min: 10, max: 50, step: 10}
"""


def _taxi_with(tmp_path: Path, tuning: str) -> Path:
    folder = tmp_path / "taxi"
    folder.mkdir()
    for name in ("schema.pbtxt", "validation.yaml"):
        source = Path(__file__).resolve().parents[3] / "schema" / "taxi" / name
        if source.exists():
            (folder / name).write_text(source.read_text())
    path = folder / "dataset.yaml"
    path.write_text(TAXI + tuning)
    return path


def test_a_search_space_is_parsed_into_typed_options(tmp_path):
    tuning = load_dataset_file(_taxi_with(tmp_path, GOOD)).tuning
    assert tuning.algorithm == "bayesian"
    assert (tuning.max_trials, tuning.max_minutes, tuning.trial_steps) == (3, 2.5, 20)
    assert tuning.search_space["learning_rate"] == {
        "min": 0.0001,
        "max": 0.03,
        "sampling": "log",
    }
    assert tuning.search_space["hidden_units"] == {"choices": [[64, 32], [16]]}
    assert tuning.search_space["train_steps"]["step"] == 10


def test_without_tuning_there_is_no_search(tmp_path):
    assert load_dataset_file(_taxi_with(tmp_path, "")).tuning is None
    assert dataset_config("taxi").tuning is None


@pytest.mark.parametrize(
    ("tuning", "named"),
    [
        ("search_space: {dropout: {min: 0.1, max: 0.5}}", "unknown hyperparameter(s) ['dropout']"),
        ("search_space: {learning_rate: {min: 0.1, max: 0.01}}", "search_space.learning_rate"),
        ("search_space: {learning_rate: {min: 0.1, max: 0.1}}", "an empty range"),
        ("search_space: {batch_size: {choices: []}}", "search_space.batch_size.choices"),
        ("search_space: {batch_size: {min: 8.5, max: 64}}", "search_space.batch_size.min"),
        ("search_space: {batch_size: {choices: [32, fast]}}", "['fast'] are not integers"),
        ("search_space: {learning_rate: {min: low, max: 0.1}}", "learning_rate.min"),
        ("search_space: {hidden_units: {choices: [[64, 0]]}}", "hidden_units.choices"),
        ("search_space: {hidden_units: {min: 8, max: 64}}", "hidden_units"),
        ("search_space: {learning_rate: {min: 0, max: 0.1, sampling: log}}", "log range"),
        ("search_space: {learning_rate: {min: 0.01, max: 0.1, sampling: cubic}}", "sampling"),
        ("search_space: {learning_rate: {min: 0.01, max: 0.1, stepp: 1}}", "stepp"),
        ("search_space: {}", "tuning.search_space"),
        ("{algorithm: grid, search_space: {batch_size: {choices: [8]}}}", "tuning.algorithm"),
        ("{max_trials: 0, search_space: {batch_size: {choices: [8]}}}", "tuning.max_trials"),
        ("{max_trials: many, search_space: {batch_size: {choices: [8]}}}", "max_trials"),
        ("{max_minutes: -1, search_space: {batch_size: {choices: [8]}}}", "max_minutes"),
        ("{trials: 3, search_space: {batch_size: {choices: [8]}}}", "unknown key(s) ['trials']"),
        ("[learning_rate]", "tuning: expected a mapping"),
        ("{parallel_trials: 0, search_space: {batch_size: {choices: [8]}}}", "parallel_trials"),
        (
            "{trial_timeout_minutes: -2, search_space: {batch_size: {choices: [8]}}}",
            "trial_timeout_minutes",
        ),
    ],
)
def test_a_bad_search_space_is_refused_naming_the_file_and_key(tmp_path, tuning, named):
    text = "\ntuning:\n" + "".join(f"  {line}\n" for line in tuning.splitlines())
    if tuning.startswith(("{", "[")):
        text = f"\ntuning: {tuning}\n"
    path = _taxi_with(tmp_path, text)
    with pytest.raises(DatasetFileError) as error:
        load_dataset_file(path)
    assert str(path) in str(error.value)
    assert named in str(error.value)


def _custom_config(component) -> dict:
    raw = component.exec_properties["custom_config"]
    return json.loads(raw) if isinstance(raw, str) else dict(raw)


def test_without_tuning_the_definition_has_no_tuner(tmp_path):
    pipeline = create_pipeline(plan_run(dataset_config("taxi").replace(run_dir=str(tmp_path))))
    ids = {c.id for c in pipeline.components}
    assert node_ids.TUNER not in ids
    trainer = next(c for c in pipeline.components if c.id == node_ids.TRAINER)
    assert "hyperparameters" not in trainer.inputs


def test_with_tuning_a_tuner_feeds_the_trainer_its_best_hyperparameters(tmp_path):
    config = load_dataset_file(_taxi_with(tmp_path, GOOD)).replace(run_dir=str(tmp_path / "r"))
    components = {c.id: c for c in create_pipeline(plan_run(config)).components}
    tuner, trainer = components[node_ids.TUNER], components[node_ids.TRAINER]
    transform = components[node_ids.TRANSFORM]
    assert tuner.inputs["examples"] is transform.outputs["transformed_examples"]
    assert tuner.inputs["transform_graph"] is transform.outputs["transform_graph"]
    assert trainer.inputs["hyperparameters"] is tuner.outputs["best_hyperparameters"]
    assert tuner.exec_properties["tuner_fn"] == "trainer.taxi.train.tuner_fn"
    custom = _custom_config(tuner)
    # The search space and the code are the cache key (with the inputs' artifacts).
    assert custom["tuning"] == config.tuning.to_dict()
    assert custom["code_fingerprint"] == code_fingerprint("trainer.taxi.train.tuner_fn")
    # Parallel trials' workers build their search from it.
    assert custom["tuner_fn"] == "trainer.taxi.train.tuner_fn"
    assert custom["tuning"]["parallel_trials"] == 1
    train_args = tuner.exec_properties["train_args"]
    assert '"num_steps": 20' in train_args or "num_steps: 20" in str(train_args)


def test_the_search_space_becomes_keras_tuner_dimensions(tmp_path):
    hp = kt.HyperParameters()
    declare(hp, load_dataset_file(_taxi_with(tmp_path, GOOD)).tuning.search_space)
    by_name = {h.name: h for h in hp.space}
    assert isinstance(by_name["learning_rate"], kt.engine.hyperparameters.Float)
    assert by_name["learning_rate"].sampling == "log"
    assert isinstance(by_name["train_steps"], kt.engine.hyperparameters.Int)
    assert by_name["hidden_units"].values == ["64,32", "16"]
    assert by_name["batch_size"].values == [32, 128]


def test_a_trial_overrides_only_the_searched_hyperparameters():
    hp = kt.HyperParameters()
    hp.Fixed("hidden_units", "16,8")
    hp.Fixed("learning_rate", 0.01)
    hp.Fixed("train_steps", 7)
    base = Hyperparameters(batch_size=8, seed=3)
    trial = trial_hyperparameters(base, hp)
    assert (trial.hidden_units, trial.learning_rate) == ((16, 8), 0.01)
    assert (trial.batch_size, trial.seed) == (8, 3)


def test_the_trainer_takes_the_tuned_values_and_steps():
    best = {"space": [], "values": {"learning_rate": 0.02, "hidden_units": "32", "train_steps": 9}}
    fn_args = SimpleNamespace(
        custom_config={"hyperparameters": {"batch_size": 16, "learning_rate": 0.5}},
        hyperparameters=best,
        train_steps=100,
    )
    hp = Hyperparameters.from_fn_args(fn_args)
    assert (hp.learning_rate, hp.hidden_units, hp.batch_size) == (0.02, (32,), 16)
    assert fn_args.train_steps == 9
    untuned = SimpleNamespace(custom_config={}, hyperparameters=None, train_steps=100)
    assert Hyperparameters.from_fn_args(untuned) == Hyperparameters()
    assert untuned.train_steps == 100
    assert tuned_values(None) == {}


def test_a_trainer_without_a_search_is_refused_when_the_pipeline_is_built(tmp_path):
    config = load_dataset_file(_taxi_with(tmp_path, GOOD)).replace(
        run_dir=str(tmp_path / "r"), run_fn="trainer.distribution.run_fn"
    )
    with pytest.raises(ValueError, match=r"trainer\.distribution\.tuner_fn is not defined"):
        create_pipeline(plan_run(config))


def test_the_taxi_and_tabular_trainers_define_their_search():
    assert defines("trainer.taxi.train.tuner_fn")
    assert defines("trainer.tabular.train.tuner_fn")
    assert defines("trainer.image.train.tuner_fn")
    assert not defines("trainer.taxi.train.no_such_fn")


def test_runs_show_lists_each_trial_best_first():
    from tfxp.cli.render import _trial_lines

    trials = [
        {"trial_id": "1", "score": 0.41, "learning_rate": 0.003, "hidden_units": "64,32"},
        {"trial_id": "0", "score": 0.69, "learning_rate": 1e-06, "hidden_units": "16"},
    ]
    lines = _trial_lines({"trials": trials, "best": trials[0]})
    assert lines[0].split() == [
        "tuning",
        "2",
        "trial(s),",
        "best",
        "first",
        "(score:",
        "eval",
        "loss)",
    ]
    assert "score 0.4100" in lines[1] and "learning_rate=0.003" in lines[1]
    assert "learning_rate=1e-06" in lines[2] and "hidden_units=16" in lines[2]
    assert _trial_lines({}) == []


def test_a_tuned_dataset_compiles_for_kubeflow_with_the_tuner_before_the_trainer(
    tmp_path, monkeypatch
):
    from kubeflow.compiler import compile_pipeline
    from kubeflow.config import KubeflowConfig
    from pipeline.datasets import DATASET_PATH_ENV

    _taxi_with(tmp_path, GOOD)
    monkeypatch.setenv(DATASET_PATH_ENV, str(tmp_path))
    job = compile_pipeline(
        KubeflowConfig(image="registry.example.com/ml/tfx:t", pipeline_root="gs://b/tfx/taxi")
    )
    tasks = job["pipelineSpec"]["root"]["dag"]["tasks"]
    assert node_ids.TUNER in tasks
    trainer_inputs = tasks[node_ids.TRAINER]["inputs"]["artifacts"]
    producer = trainer_inputs["hyperparameters"]["taskOutputArtifact"]["producerTask"]
    assert producer == node_ids.TUNER


def test_the_time_budget_stops_new_trials_after_the_first(tmp_path):
    from trainer.tuning import _with_deadline

    def oracle(max_minutes):
        hp = kt.HyperParameters()
        hp.Choice("batch_size", [8, 16, 32])
        made = _with_deadline(kt.oracles.RandomSearchOracle, max_minutes)(
            objective=kt.Objective("val_loss", "min"), max_trials=3, hyperparameters=hp, seed=1
        )
        made._set_project_dir(str(tmp_path), f"search{max_minutes}")
        return made

    spent = oracle(1e-9)  # the budget is gone before the search starts
    first = spent.create_trial("t")
    assert first.status == kt.engine.trial.TrialStatus.RUNNING
    spent.update_trial(first.trial_id, {"val_loss": 1.0})
    spent.end_trial(first)
    assert spent.create_trial("t").status == kt.engine.trial.TrialStatus.STOPPED
    # Within the budget, the trial budget rules.
    ample = oracle(60)
    statuses = []
    for _ in range(4):
        trial = ample.create_trial("t")
        statuses.append(trial.status)
        if trial.status == kt.engine.trial.TrialStatus.RUNNING:
            ample.update_trial(trial.trial_id, {"val_loss": 1.0})
            ample.end_trial(trial)
    assert statuses.count(kt.engine.trial.TrialStatus.RUNNING) == 3
    assert statuses[-1] == kt.engine.trial.TrialStatus.STOPPED


DIGITS = Path(__file__).resolve().parents[3] / "schema" / "digits"
IMAGE_SEARCH = """
tuning:
  max_trials: 2
  parallel_trials: 2
  trial_timeout_minutes: 5
  search_space:
    learning_rate: {min: 0.001, max: 0.01, sampling: log}
    filters: {choices: [[8, 16], [32]]}
    dense_units: {min: 16, max: 64, step: 16}
    dropout: {min: 0.0, max: 0.5}
"""


def _digits_with(tmp_path: Path, tuning: str) -> Path:
    folder = tmp_path / "digits"
    folder.mkdir()
    for source in DIGITS.iterdir():
        (folder / source.name).write_text(source.read_text())
    path = folder / "dataset.yaml"
    path.write_text(path.read_text() + tuning)
    return path


def test_an_image_dataset_searches_the_cnn_s_knobs(tmp_path):
    tuning = load_dataset_file(_digits_with(tmp_path, IMAGE_SEARCH)).tuning
    assert set(tuning.search_space) == {"learning_rate", "filters", "dense_units", "dropout"}
    assert (tuning.parallel_trials, tuning.trial_timeout_minutes) == (2, 5)
    hp = kt.HyperParameters()
    declare(hp, tuning.search_space)
    assert {h.name: h for h in hp.space}["filters"].values == ["8,16", "32"]


def test_an_image_trial_builds_the_cnn_with_its_values():
    from trainer.image.train import ImageHyperparameters, _cnn

    hp = kt.HyperParameters()
    hp.Fixed("filters", "8,16")
    hp.Fixed("dense_units", 24)
    hp.Fixed("dropout", 0.5)
    hp.Fixed("learning_rate", 0.01)
    values = trial_hyperparameters(ImageHyperparameters(flip=False), hp)
    assert (values.filters, values.dense_units, values.flip) == ((8, 16), 24, False)
    options = {"height": 8, "width": 8, "channels": 1, "class_names": list("0123456789")}
    model = _cnn(options, values)
    convs = [layer.filters for layer in model.layers if hasattr(layer, "filters")]
    assert convs == [8, 8, 16, 16]
    [dropout] = [layer for layer in model.layers if "dropout" in layer.name]
    assert dropout.rate == 0.5
    assert model.optimizer.learning_rate.numpy() == pytest.approx(0.01)


def test_the_image_trainer_takes_the_tuned_values():
    from trainer.image.train import ImageHyperparameters

    best = {"space": [], "values": {"filters": "16", "dropout": 0.3, "train_steps": 11}}
    fn_args = SimpleNamespace(
        custom_config={"hyperparameters": {"flip": False}}, hyperparameters=best, train_steps=300
    )
    hp = ImageHyperparameters.from_fn_args(fn_args)
    assert (hp.filters, hp.dropout, hp.flip, fn_args.train_steps) == ((16,), 0.3, False, 11)


def test_the_search_result_has_the_fields_tfx_s_tuner_executor_reads():
    from tfx.components.tuner.component import TunerFnResult as Tfx

    from trainer.tuning import TunerFnResult

    assert TunerFnResult._fields == Tfx._fields


def test_the_trials_log_folder_key_is_the_tuner_executors():
    """trainer/ and components/ import each other nowhere: the key is named twice."""
    from components.tuner.component import TENSORBOARD_KEY
    from trainer.tuning import TRIAL_LOGS_KEY

    assert TRIAL_LOGS_KEY == TENSORBOARD_KEY


SEQUENCE = """kind: sequence
label: converted
task: binary
classes: ['no', 'yes']
sequence:
  key: session_id
  order_by: event_time
  features:
    action: vocabulary
    amount: zscore
"""


def _sequence_with(tmp_path: Path, tuning: str) -> Path:
    folder = tmp_path / "shop"
    folder.mkdir()
    path = folder / "dataset.yaml"
    path.write_text(SEQUENCE + tuning)
    return path


def test_a_sequence_dataset_searches_the_sequence_trainer_s_knobs(tmp_path):
    space = "{embedding_dim: {choices: [4, 16]}, dropout: {min: 0.0, max: 0.5}}"
    config = load_dataset_file(_sequence_with(tmp_path, f"tuning:\n  search_space: {space}\n"))
    assert set(config.tuning.search_space) == {"embedding_dim", "dropout"}
    assert defines(config.run_fn.rsplit(".", 1)[0] + ".tuner_fn")


@pytest.mark.parametrize(
    ("kind", "space", "named"),
    [
        ("image", "{hidden_units: {choices: [[8]]}}", "unknown hyperparameter(s) ['hidden_units']"),
        ("image", "{dropout: {min: 0.2, max: 1.0}}", "outside [0.0, 1.0) for dropout"),
        ("image", "{dropout: {choices: [0.1, 1.5]}}", "[1.5] outside"),
        ("image", "{filters: {min: 8, max: 32}}", "layer sizes are tuned as"),
        (
            "sequence",
            "{hidden_units: {choices: [[8]]}}",
            "unknown hyperparameter(s) ['hidden_units']",
        ),
        ("sequence", "{units: {choices: [8, 16]}}", "unknown hyperparameter(s) ['units']"),
        ("sequence", "{dropout: {choices: [0.1, 1.5]}}", "[1.5] outside"),
    ],
)
def test_a_bad_image_or_sequence_search_space_is_refused(tmp_path, kind, space, named):
    tuning = f"tuning:\n  search_space: {space}\n"
    if kind == "image":
        path = _digits_with(tmp_path, "\n" + tuning)
    else:
        path = _sequence_with(tmp_path, tuning)
    with pytest.raises(DatasetFileError) as error:
        load_dataset_file(path)
    assert named in str(error.value)


def test_the_sequence_trainer_takes_the_tuned_values():
    from trainer.sequence.train import SequenceHyperparameters

    best = {"space": [], "values": {"embedding_dim": 16, "dropout": 0.2, "train_steps": 9}}
    fn_args = SimpleNamespace(
        custom_config={"hyperparameters": {"seed": 7}}, hyperparameters=best, train_steps=300
    )
    hp = SequenceHyperparameters.from_fn_args(fn_args)
    assert (hp.embedding_dim, hp.dropout, hp.seed, fn_args.train_steps) == (16, 0.2, 7, 9)
