"""The pipeline's node ids, in run order: the one list every reader of ML Metadata uses.

The definition names its components by these; the run summary, lineage, the
report lookup and the runners find executions by them. Plain strings: a query
need not import TFX to know them.
"""

from __future__ import annotations

from pipeline.config import PipelineConfig

EXAMPLE_GEN = "CsvExampleGen"
IMAGE_EXAMPLE_GEN = "ImageExampleGen"  # instead of EXAMPLE_GEN for image datasets
SEQUENCE_EXAMPLE_GEN = "SequenceExampleGen"  # instead of EXAMPLE_GEN for event tables
STATISTICS_GEN = "StatisticsGen"
SCHEMA_IMPORTER = "CuratedSchemaImporter"
EXAMPLE_VALIDATOR = "ExampleValidator"
# The drift baseline (previous span's statistics) and the gate that blocks Transform.
PREVIOUS_STATISTICS_RESOLVER = "previous_span_statistics_resolver"
VALIDATION_GATE = "ValidationGate"
TRANSFORM = "Transform"
TRAINER = "Trainer"
TUNER = "Tuner"
BASELINE_RESOLVER = "baseline_model_resolver"
# Only with a rolling window (config.window > 1): gathers the window's Examples.
SPAN_WINDOW_RESOLVER = "span_window_resolver"
SPAN_WINDOW_EXAMPLES = "span_window_examples"
EVALUATOR = "Evaluator"
SERVING_CHECK = "ServingCheck"
PUSHER = "Pusher"
MODEL_CARD = "ModelCard"
# Only when the dataset file asks for it (batch_inference.in_pipeline); `tfxp infer` records
# its scorings under the same node id.
BATCH_INFERENCE = "BatchInference"


# Either ingests a dataset's raw data, by its kind (config.example_gen).
EXAMPLE_GENS = (EXAMPLE_GEN, IMAGE_EXAMPLE_GEN, SEQUENCE_EXAMPLE_GEN)


def example_gen_id(config: PipelineConfig) -> str:
    return {"image": IMAGE_EXAMPLE_GEN, "sequence": SEQUENCE_EXAMPLE_GEN}.get(
        config.example_gen, EXAMPLE_GEN
    )
