"""StatisticsGen's executor: TFDV's statistics from one in-process pass when exact, else TFX's.

TFX's StatisticsGen runs TFDV's `GenerateStatistics` over Beam. For the default
statistics options (a schema at most) this executor instead decodes each split's
TFRecord files into Arrow record batches (tfx_bsl's decoder, without a schema, as
StatisticsGen's TFXIO reads them) and feeds them to TFDV's own combiner generators
in this process (`stats_impl.get_generators(options, in_memory=True)`), streaming:
one accumulator per generator, one batch at a time.

Examples from the Arrow CSV ingest carry their layout (components/example_gen/layout.py):
they are decoded by `tf.io.parse_example` into the same record batches, several
times faster than tfx_bsl's decoder, and then this single process beats Beam's
worker processes, so it runs under the multi-process runner too. Other examples
are decoded by tfx_bsl, and under the multi-process runner they go to TFX's path.

Under the project's Spark runner (`--runner=beam_spark.SparkRunner`, `tfxp run --beam
spark`) the same per-batch work (components/fast/stats/batches.py) runs as a Beam
pipeline on the cluster (components/fast/stats/on_cluster.py): pieces of each split
decoded and accumulated in Spark tasks, their accumulators merged. Under any other
remote runner TFX's executor runs.

The in-process generators are Beam's, with one exception: top-k values and unique
counts come from sketches (Misra-Gries, 1,024 counters; KMV, 16,384 hashes) instead
of Beam's exact counting. Both are exact while a feature has fewer than 1,024
distinct values, so a split where any string or categorical feature reaches 1,024
is recomputed by TFX's executor (the whole run, logged). Means and standard
deviations are float sums in another order: equal to ~1e-15 relative.

The artifact is the one StatisticsGen writes (split names, span, the sample-rate
and dashboard-link properties, `Split-<name>/FeatureStats.pb`), so ExampleValidator,
the drift and skew checks, the report and Transform read it unchanged.
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any

import tensorflow_data_validation as tfdv
from absl import logging
from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx.components.statistics_gen import executor as tfx_statistics
from tfx.components.util import examples_utils
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, json_utils, stats_utils

from components.base.local_beam import cluster_runner, runner_refusal
from components.example_gen.layout import Layout, layout_of
from components.fast.stats import on_cluster
from components.fast.stats.batches import (
    Inexact,
    StatisticsCombineFn,
    check_exact,
    file_accumulators,
    merged_statistics,
)
from components.io.pieces import BATCH_SIZE, example_files, pieces


def _refusal(input_dict, exec_properties) -> str | None:
    keys = standard_component_specs
    if exec_properties.get(keys.STATS_OPTIONS_JSON_KEY):
        return "statistics options"
    if json_utils.loads(exec_properties.get(keys.SAMPLE_RATE_BY_SPLIT_KEY, "null")):
        return "sample rates"
    if exec_properties.get(keys.SHARDED_STATS_OUTPUT_KEY):
        return "sharded output"
    examples = artifact_utils.get_single_instance(input_dict[keys.EXAMPLES_KEY])
    if examples.has_custom_property(examples_utils.CUSTOM_SPLIT_PATTERN_PROPERTY_NAME):
        return "custom split patterns"
    # The fast decoders read tf.Examples; SequenceExamples go through TFX's TFXIO.
    payload = examples_utils.get_payload_format(examples)
    if payload != example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE:
        return f"payload format {example_gen_pb2.PayloadFormat.Name(payload)}"
    return None


def split_statistics(
    split_uri: str,
    options: tfdv.StatsOptions,
    layout: Layout | None = None,
    batch_size: int = BATCH_SIZE,
) -> statistics_pb2.DatasetFeatureStatisticsList:
    """TFDV's statistics of every example under `split_uri`, in this process, streaming
    (`layout`: the examples' columns, when the ingest recorded them)."""
    files, compression = example_files([split_uri], Inexact)
    combine = StatisticsCombineFn(options)
    combine.setup()
    accumulators = []
    for _, file_pieces in itertools.groupby(
        pieces(files, compression, batch_size), key=lambda p: p.files
    ):
        accumulators += file_accumulators(combine, list(file_pieces), layout)
    return merged_statistics(combine, accumulators)


class Executor(tfx_statistics.Executor):
    """TFX's StatisticsGen executor with the in-process pass in front of it."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # TFX's name
        started = time.perf_counter()
        examples = artifact_utils.get_single_instance(
            input_dict[standard_component_specs.EXAMPLES_KEY]
        )
        layout = layout_of(examples)
        args = self._beam_pipeline_args
        refusal = _refusal(input_dict, exec_properties)
        # On the project's Spark runner the fast path runs as a Beam pipeline there.
        on_spark = refusal is None and cluster_runner(args)
        if refusal is None and not on_spark:
            # With the layout the in-process pass is faster than Beam's workers.
            refusal = runner_refusal(args, single_process=layout is None)
        if refusal is None:
            try:
                self._fast(input_dict, output_dict, exec_properties, layout, on_spark)
            except Inexact as inexact:
                refusal = str(inexact)
            else:
                logging.info(
                    "StatisticsGen: %s (%s decoder), %.1f s",
                    "the fast path's Beam pipeline on the cluster"
                    if on_spark
                    else "in-process pass",
                    "tfx_bsl's" if layout is None else "the layout's",
                    time.perf_counter() - started,
                )
                return
        logging.info("StatisticsGen: TFX's Beam path (the fast path does not cover: %s)", refusal)
        super().Do(input_dict, output_dict, exec_properties)

    def _fast(
        self, input_dict, output_dict, exec_properties, layout: Layout | None, on_spark: bool
    ) -> None:
        keys = standard_component_specs
        examples = artifact_utils.get_single_instance(input_dict[keys.EXAMPLES_KEY])
        excluded = json_utils.loads(exec_properties.get(keys.EXCLUDE_SPLITS_KEY, "null")) or []
        splits = [
            s for s in artifact_utils.decode_split_names(examples.split_names) if s not in excluded
        ]
        if not splits:
            raise ValueError(f"No splits for examples artifact: {examples}")
        options = tfdv.StatsOptions()
        if input_dict.get(keys.SCHEMA_KEY):
            schema_uri = artifact_utils.get_single_uri(input_dict[keys.SCHEMA_KEY])
            options.schema = io_utils.SchemaReader().read(io_utils.get_only_uri_in_dir(schema_uri))
        uris = {split: artifact_utils.get_split_uri([examples], split) for split in splits}
        if on_spark:
            results = on_cluster.split_statistics(
                self._make_beam_pipeline(), uris, options, layout, self._get_tmp_dir()
            )
        else:
            results = {split: split_statistics(uri, options, layout) for split, uri in uris.items()}
        # Every split first: nothing is written unless all are exact.
        for statistics in results.values():
            check_exact(statistics)
        artifact = artifact_utils.get_single_instance(output_dict[keys.STATISTICS_KEY])
        _set_properties(artifact, examples, splits)
        for split, statistics in results.items():
            uri = artifact_utils.get_split_uri(output_dict[keys.STATISTICS_KEY], split)
            io_utils.write_bytes_file(
                os.path.join(uri, tfx_statistics.DEFAULT_FILE_NAME), statistics.SerializeToString()
            )
            logging.info("Statistics for split %s written to %s.", split, uri)


def _set_properties(artifact: Any, examples: Any, splits: list[str]) -> None:
    """The output artifact's properties, as TFX's StatisticsGen executor sets them."""
    artifact.split_names = artifact_utils.encode_split_names(splits)
    artifact.span = examples.span
    try:
        link = stats_utils.generate_stats_dashboard_link(artifact)
    except Exception:  # noqa: BLE001 - TFX's executor records an empty link likewise
        link = ""
    artifact.set_string_custom_property(tfx_statistics.STATS_DASHBOARD_LINK, link)
    artifact.set_json_value_custom_property(
        tfx_statistics.SAMPLE_RATE_BY_SPLIT_PROPERTY_NAME,
        json_utils.dumps({split: 1.0 for split in splits}),
    )
