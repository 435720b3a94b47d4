"""pipeline.definition: the pipeline graph built from a PipelineConfig (nothing is run)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from tensorflow_metadata.proto.v0 import schema_pb2

from components.example_gen.csv_options import columns_of
from components.validation.schema_importer import file_sha256, load_schema
from pipeline import node_ids
from pipeline.datasets import dataset_config
from pipeline.definition import create_pipeline
from pipeline.fingerprint import code_fingerprint
from pipeline.plan import plan_run

try:  # schema -> CSV column types; moved from pipeline.definition to components.validation.schema_importer
    from components.validation.schema_importer import schema_column_types as schema_columns
except ImportError:
    from pipeline.definition import schema_columns

COMPONENT_IDS = {
    node_ids.EXAMPLE_GEN,
    node_ids.STATISTICS_GEN,
    node_ids.SCHEMA_IMPORTER,
    node_ids.EXAMPLE_VALIDATOR,
    node_ids.PREVIOUS_STATISTICS_RESOLVER,
    node_ids.VALIDATION_GATE,
    node_ids.TRANSFORM,
    node_ids.TRAINER,
    node_ids.BASELINE_RESOLVER,
    node_ids.EVALUATOR,
    node_ids.SERVING_CHECK,
    node_ids.PUSHER,
    node_ids.MODEL_CARD,
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    config = dataset_config("taxi").replace(
        run_dir=str(tmp_path_factory.mktemp("run")), hyperparameters={"batch_size": 32}
    )
    return config, create_pipeline(plan_run(config))


def _components(pipeline) -> dict:
    return {c.id: c for c in pipeline.components}


def _custom_config(component) -> dict:
    raw = component.exec_properties["custom_config"]
    return json.loads(raw) if isinstance(raw, str) else dict(raw)


def test_component_ids_are_the_module_constants(built):
    _, pipeline = built
    ids = [c.id for c in pipeline.components]
    assert len(ids) == len(COMPONENT_IDS) == 13
    assert set(ids) == COMPONENT_IDS


def test_the_readme_diagram_names_every_node_of_the_pipeline(built):
    # The README's diagram is the docs' home page's too (a snippet): it must not lose a node.
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    diagram = readme.split("[start:diagram]", 1)[1].split("[end:diagram]", 1)[0]
    drawn = set(re.findall(r"▼ (\w+)", diagram)) | set(re.findall(r"▼ \w+ \+ (\w+)", diagram))
    _, pipeline = built
    assert {c.id for c in pipeline.components} == drawn


def test_components_run_after_their_inputs(built):
    _, pipeline = built
    order = [c.id for c in pipeline.components]
    before = [
        (node_ids.EXAMPLE_GEN, node_ids.STATISTICS_GEN),
        (node_ids.SCHEMA_IMPORTER, node_ids.TRANSFORM),
        (node_ids.STATISTICS_GEN, node_ids.EXAMPLE_VALIDATOR),
        (node_ids.EXAMPLE_VALIDATOR, node_ids.VALIDATION_GATE),
        (node_ids.PREVIOUS_STATISTICS_RESOLVER, node_ids.VALIDATION_GATE),
        (node_ids.VALIDATION_GATE, node_ids.TRANSFORM),
        (node_ids.TRANSFORM, node_ids.TRAINER),
        (node_ids.TRAINER, node_ids.EVALUATOR),
        (node_ids.BASELINE_RESOLVER, node_ids.EVALUATOR),
        (node_ids.EVALUATOR, node_ids.SERVING_CHECK),
        (node_ids.SERVING_CHECK, node_ids.PUSHER),
        (node_ids.PUSHER, node_ids.MODEL_CARD),
    ]
    for first, then in before:
        assert order.index(first) < order.index(then), (first, then)


def test_transform_waits_for_the_validation_gate(built):
    config, pipeline = built
    nodes = _components(pipeline)
    gate = nodes[node_ids.VALIDATION_GATE]
    assert node_ids.VALIDATION_GATE in {n.id for n in nodes[node_ids.TRANSFORM].upstream_nodes}
    settings = json.loads(gate.exec_properties["settings"])
    assert settings["drift"]["numeric"] == 0.15 and settings["warn_only"] == []
    assert gate.exec_properties["serving_data"] == config.serving_pattern
    assert gate.exec_properties["serving_sha256"]  # data/taxi/serving/ ships requests
    assert gate.exec_properties["report_dir"] == config.report_dir
    downgraded = create_pipeline(plan_run(config.replace(warn_only=("drift",))))
    settings = json.loads(
        _components(downgraded)[node_ids.VALIDATION_GATE].exec_properties["settings"]
    )
    assert settings["warn_only"] == ["drift"]


def test_pipeline_paths_are_under_run_dir(built):
    config, pipeline = built
    assert pipeline.pipeline_info.pipeline_name == "taxi"
    assert pipeline.pipeline_info.pipeline_root == config.pipeline_root
    assert config.pipeline_root.startswith(config.run_dir)
    assert pipeline.metadata_connection_config.sqlite.filename_uri == config.metadata_path
    pusher = _components(pipeline)[node_ids.PUSHER]
    assert config.serving_dir in pusher.exec_properties["push_destination"]


def test_transform_custom_config_has_the_code_fingerprint(built):
    config, pipeline = built
    transform = _components(pipeline)[node_ids.TRANSFORM]
    assert transform.exec_properties["preprocessing_fn"] == config.preprocessing_fn
    fingerprint = _custom_config(transform)["code_fingerprint"]
    assert fingerprint == code_fingerprint(config.preprocessing_fn)
    assert len(fingerprint) == 64


def test_trainer_custom_config_has_fingerprint_and_hyperparameters(built):
    config, pipeline = built
    trainer = _components(pipeline)[node_ids.TRAINER]
    assert trainer.exec_properties["run_fn"] == config.run_fn
    custom = _custom_config(trainer)
    assert custom["code_fingerprint"] == code_fingerprint(config.run_fn)
    assert custom["hyperparameters"] == {"batch_size": 32}
    transform = _components(pipeline)[node_ids.TRANSFORM]
    assert custom["code_fingerprint"] != _custom_config(transform)["code_fingerprint"]


def test_example_gen_checks_columns_from_the_schema(built):
    config, pipeline = built
    example_gen = _components(pipeline)[node_ids.EXAMPLE_GEN]
    columns = columns_of(example_gen.exec_properties)
    assert columns == schema_columns(load_schema(config.schema_file))
    assert example_gen.exec_properties["input_base"] == config.data_root


def test_schema_importer_is_keyed_by_file_content(built, tmp_path):
    config, pipeline = built
    original = _components(pipeline)[node_ids.SCHEMA_IMPORTER].exec_properties
    assert original["schema_file"] == config.schema_file
    assert original["content_sha256"] == file_sha256(config.schema_file)

    copy = tmp_path / "schema.pbtxt"
    shutil.copyfile(config.schema_file, copy)
    copied_config = config.replace(schema_file=str(copy))
    same = _components(create_pipeline(plan_run(copied_config)))[node_ids.SCHEMA_IMPORTER]
    # Same content at another path: same key.
    assert same.exec_properties["content_sha256"] == original["content_sha256"]
    assert same.exec_properties["schema_file"] == str(copy)

    text = copy.read_text().replace("max: 23", "max: 22", 1)
    assert text != copy.read_text()
    copy.write_text(text)
    edited = _components(create_pipeline(plan_run(copied_config)))[node_ids.SCHEMA_IMPORTER]
    assert edited.exec_properties["content_sha256"] != original["content_sha256"]
    assert edited.exec_properties["content_sha256"] == file_sha256(str(copy))


def test_comment_only_edit_also_changes_the_key(built, tmp_path):
    # The key is the file's bytes, not the parsed proto.
    config, _ = built
    copy = tmp_path / "schema.pbtxt"
    copy.write_text("# reviewed\n" + Path(config.schema_file).read_text())
    importer = _components(create_pipeline(plan_run(config.replace(schema_file=str(copy)))))[
        node_ids.SCHEMA_IMPORTER
    ]
    assert importer.exec_properties["content_sha256"] != file_sha256(config.schema_file)


def test_broken_schema_fails_the_build_naming_the_file(built, tmp_path):
    config, _ = built
    broken = tmp_path / "broken.pbtxt"
    broken.write_text("feature {\n")
    with pytest.raises(ValueError, match="broken.pbtxt"):
        create_pipeline(plan_run(config.replace(schema_file=str(broken))))


def test_schema_columns_maps_types():
    columns = schema_columns(load_schema(dataset_config("taxi").schema_file))
    assert columns["fare"] == "FLOAT"
    assert columns["tips"] == "FLOAT"
    assert columns["pickup_latitude"] == "FLOAT"
    assert columns["company"] == "BYTES"
    assert columns["payment_type"] == "BYTES"
    assert columns["trip_start_hour"] == "INT"
    assert columns["pickup_census_tract"] == "INT"
    assert len(columns) == 18
    assert set(columns.values()) == {"INT", "FLOAT", "BYTES"}


def test_schema_columns_on_a_handmade_schema():
    schema = schema_pb2.Schema()
    schema.feature.add(name="x", type=schema_pb2.INT)
    schema.feature.add(name="y", type=schema_pb2.BYTES)
    schema.feature.add(name="z", type=schema_pb2.FLOAT)
    assert schema_columns(schema) == {"x": "INT", "y": "BYTES", "z": "FLOAT"}
