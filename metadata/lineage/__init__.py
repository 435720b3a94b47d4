"""Lineage from ML Metadata alone: which data trained which model, what changed between runs.

Everything here reads ML Metadata through its own query API (events, contexts,
`get_lineage_subgraph`, filter queries), never SQL against the file, so the
same code answers on SQLite and on MySQL/MariaDB.

What TFX and this project record, and where this module finds it:

- runs: `pipeline_run` contexts (our run ids); components: `node` contexts
  named `<pipeline>.<node id>`; an execution's state COMPLETE (executed) or
  CACHED (reused the outputs of an earlier COMPLETE execution, with OUTPUT
  events to the same artifacts);
- data: Examples artifacts of ExampleGen, custom properties `span`,
  `version` (TFX), `content_sha256`, `input_base`, `row_count`,
  `unlabelled_rows_dropped` (our ExampleGen; older stores have TFX's
  `input_fingerprint` only); the file pattern is ExampleGen's resolved
  `input_config` exec property;
- schema: CuratedSchemaImporter's exec property `content_sha256`;
- code and hyperparameters: Transform/Trainer exec property `custom_config`
  (`code_fingerprint`, `hyperparameters`), Trainer `train_args`/`eval_args`;
- verdicts: ModelBlessing (`blessed`, `current_model_id`,
  `baseline_model_id`), ModelEvaluation (TFMA result, read from its uri),
  PushedModel (`pushed`, `pushed_destination`, `pushed_version`).

Model lineage walks *producers*: for each artifact the COMPLETE execution
that wrote it (cached executions point at the same artifacts and are listed
as re-uses, not as a second origin).

The queries are grouped by subject: runs.py, models.py, spans.py, on core.py (the
store's executions, runs, artifacts and events) and records.py (what they answer with).
"""

from __future__ import annotations

from metadata.lineage.models import ModelQueries
from metadata.lineage.runs import RunQueries
from metadata.lineage.spans import SpanQueries

__all__ = ["Lineage"]


class Lineage(RunQueries, ModelQueries, SpanQueries):
    """One pipeline's runs, models and data in an ML Metadata store."""
