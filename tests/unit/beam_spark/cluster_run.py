"""Run the equality pipelines as any Beam program would: `python cluster_run.py OUT_DIR
--runner=beam_spark.SparkRunner --spark_master=spark://...`; print what the run cost."""

from __future__ import annotations

import json
import sys

import apache_beam as beam
import spark_pipelines as sp
from apache_beam.options.pipeline_options import PipelineOptions


def main(argv: list[str]) -> None:
    out_dir, flags = argv[0], argv[1:]
    costs = []
    for build in (sp.build_main, sp.build_read):
        pipeline = beam.Pipeline(options=PipelineOptions(flags))
        build(pipeline, out_dir)
        result = pipeline.run()
        result.wait_until_finish()
        costs.append(result.spark)
    print(json.dumps(costs))


if __name__ == "__main__":
    main(sys.argv[1:])
