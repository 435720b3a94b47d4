"""Synthetic pipeline runs in an ML Metadata store, shaped as LocalDagRunner records them.

Contexts `pipeline`, `pipeline_run` and `node` (`<pipeline>.<node id>`); per node an
execution with INPUT/OUTPUT events keyed as TFX keys them; the artifacts with the
custom properties this project's components set (span, content_sha256, row_count,
decision, blessed, pushed_version, ...) and small real files under their URIs (a
statistics file with a category value given by the caller, a report, a schema).
A rerun marks its executions CACHED with OUTPUT events to the first run's
artifacts, as TFX's cache does. Used by the console's tests and benchmarks/ui.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as pb

XSS = "<img src=x onerror=alert(1)>"

# (node id, execution type, inputs {key: producing node}, outputs {key: artifact type})
NODES = (
    ("CsvExampleGen", "components.example_gen.csv_example_gen.CheckedCsvExampleGen", {}, {"examples": "Examples"}),
    ("CuratedSchemaImporter", "components.validation.schema_importer.CuratedSchemaImporter", {}, {"schema": "Schema"}),
    ("StatisticsGen", "tfx.components.statistics_gen.component.StatisticsGen", {"examples": "CsvExampleGen"}, {"statistics": "ExampleStatistics"}),
    ("ValidationGate", "components.validation.gate.ValidationGate", {"statistics": "StatisticsGen", "schema": "CuratedSchemaImporter"}, {"result": "tfxp.ValidationResult"}),
    ("Trainer", "tfx.components.trainer.component.Trainer", {"examples": "CsvExampleGen", "schema": "CuratedSchemaImporter"}, {"model": "Model", "model_run": "ModelRun"}),
    ("Evaluator", "tfx.components.evaluator.component.Evaluator", {"model": "Trainer", "examples": "CsvExampleGen"}, {"evaluation": "ModelEvaluation", "blessing": "ModelBlessing"}),
    ("Pusher", "components.release.atomic_pusher.Pusher", {"model": "Trainer", "model_blessing": "Evaluator"}, {"pushed_model": "PushedModel"}),
)  # fmt: skip


def open_sqlite(path: str | Path, *, create: bool = True):
    cfg = pb.ConnectionConfig()
    cfg.sqlite.filename_uri = str(path)
    mode = pb.SqliteMetadataSourceConfig
    cfg.sqlite.connection_mode = mode.READWRITE_OPENCREATE if create else mode.READWRITE
    return metadata_store.MetadataStore(cfg)


@dataclass
class Writer:
    """Writes runs of one pipeline into `store`, files under `root`."""

    store: metadata_store.MetadataStore
    root: Path
    pipeline: str = "taxi"
    category: str = "Cash"
    types: dict[str, int] = field(default_factory=dict)
    runs: int = 0
    contexts: dict[tuple[str, str], pb.Context] = field(default_factory=dict)
    written: dict[int, pb.Artifact] = field(default_factory=dict)
    # TFX's legacy launcher (the Airflow DAG runner): `run` and `component_run`
    # contexts named after the pipeline and run, the node in `component_id`.
    legacy: bool = False

    def _type(self, kind: str, name: str) -> int:
        key = f"{kind}:{name}"
        if key not in self.types:
            if kind == "artifact":
                self.types[key] = self.store.put_artifact_type(pb.ArtifactType(name=name))
            elif kind == "execution":
                self.types[key] = self.store.put_execution_type(pb.ExecutionType(name=name))
            else:
                self.types[key] = self.store.put_context_type(pb.ContextType(name=name))
        return self.types[key]

    def _context(self, kind: str, name: str) -> pb.Context:
        if (kind, name) not in self.contexts:
            found = self.store.get_context_by_type_and_name(kind, name)
            if found is None:
                found = pb.Context(type_id=self._type("context", kind), name=name)
                found.id = self.store.put_contexts([found])[0]
            self.contexts[kind, name] = found
        return self.contexts[kind, name]

    def run(
        self,
        run_id: str,
        *,
        span: int = 1,
        reuse: dict[str, dict[str, int]] | None = None,
        state: int = pb.Execution.COMPLETE,
        stop_after: str | None = None,
        metrics_uri: str | None = None,
    ) -> dict[str, dict[str, int]]:
        """One run; `reuse` (an earlier run's return value): cached executions. Returns
        {node: {output key: artifact id}}. `stop_after`: the last node written, with
        `state` (RUNNING: a run still going; FAILED: a failed one)."""
        self.runs += 1
        pipeline_ctx = self._context("pipeline", self.pipeline)
        run_ctx = (
            self._context("run", f"{self.pipeline}.{run_id}")
            if self.legacy
            else self._context("pipeline_run", run_id)
        )
        outputs: dict[str, dict[str, int]] = {}
        for node, exec_type, inputs, outs in NODES:
            last = node == stop_after
            ex = pb.Execution(type_id=self._type("execution", exec_type))
            ex.last_known_state = state if last else pb.Execution.COMPLETE
            self._exec_properties(ex, node)
            if self.legacy:
                ex.custom_properties["component_id"].string_value = node
                ex.custom_properties["run_id"].string_value = run_id
            events = []
            for key, source in inputs.items():
                aid = self._input_id(outputs, source, key)
                if aid is not None:
                    events.append((aid, pb.Event.INPUT, key))
            ids: dict[str, int] = {}
            if reuse is not None and not last:
                ex.last_known_state = pb.Execution.CACHED
                ids = dict(reuse[node])
                pairs = [
                    (self._artifact_stub(a), self._event(pb.Event.OUTPUT, k))
                    for k, a in ids.items()
                ]
            elif last and state != pb.Execution.COMPLETE:
                pairs = []
            else:
                pairs = [
                    (
                        self._artifact(node, key, type_name, run_id, span, metrics_uri),
                        self._event(pb.Event.OUTPUT, key),
                    )
                    for key, type_name in outs.items()
                ]
            pairs += [
                (self._artifact_stub(aid), self._event(kind, key)) for aid, kind, key in events
            ]
            node_ctx = (
                self._context("component_run", f"{self.pipeline}.{run_id}.{node}")
                if self.legacy
                else self._context("node", f"{self.pipeline}.{node}")
            )
            _, art_ids, _ = self.store.put_execution(ex, pairs, [pipeline_ctx, run_ctx, node_ctx])
            for (art, _), aid in zip(pairs, art_ids, strict=True):
                art.id = aid
                self.written[aid] = art
            if not ids:
                ids = {
                    key: art_ids[i]
                    for i, key in enumerate(outs)
                    if i < len(art_ids) and pairs[i][1].type == pb.Event.OUTPUT
                }
            outputs[node] = ids
            if last:
                break
        return outputs

    @staticmethod
    def _input_id(outputs, source: str, key: str) -> int | None:
        produced = outputs.get(source, {})
        if key in produced:
            return produced[key]
        wanted = {"model_blessing": "blessing"}.get(key, key)
        return produced.get(wanted) or next(iter(produced.values()), None)

    def _artifact_stub(self, artifact_id: int) -> pb.Artifact:
        """The artifact as written (put_execution updates what it is given: no stubs)."""
        if artifact_id not in self.written:
            self.written[artifact_id] = self.store.get_artifacts_by_id([artifact_id])[0]
        return self.written[artifact_id]

    @staticmethod
    def _event(kind: int, key: str) -> pb.Event:
        ev = pb.Event(type=kind)
        ev.path.steps.add().key = key
        ev.path.steps.add().index = 0
        return ev

    def _exec_properties(self, ex: pb.Execution, node: str) -> None:
        cp = ex.custom_properties
        if node == "CsvExampleGen":
            cp["input_base"].string_value = str(self.root / "data")
            cp["input_config"].string_value = json.dumps(
                {"splits": [{"name": "single_split", "pattern": "span-1/*.csv"}]}
            )
        elif node == "CuratedSchemaImporter":
            cp["content_sha256"].string_value = "ab" * 32
            cp["schema_file"].string_value = str(self.root / "schema.pbtxt")
        elif node == "Trainer":
            cp["custom_config"].string_value = json.dumps(
                {
                    "code_fingerprint": f"code{self.runs % 3}",
                    "hyperparameters": {
                        "learning_rate": 0.001 * (1 + self.runs % 2),
                        "hidden_units": 16,
                    },
                }
            )
            cp["train_args"].string_value = json.dumps({"num_steps": 40})

    def _artifact(self, node, key, type_name, run_id, span, metrics_uri) -> pb.Artifact:
        uri = self.root / "pipeline_root" / node / key / f"{self.runs}"
        a = pb.Artifact(
            type_id=self._type("artifact", type_name), uri=str(uri), state=pb.Artifact.LIVE
        )
        cp = a.custom_properties
        if type_name == "Examples":
            cp["span"].int_value = span
            cp["content_sha256"].string_value = f"{span:02d}" + "cd" * 31
            cp["row_count"].int_value = 3000
            cp["input_base"].string_value = str(self.root / "data")
            _write(uri / "Split-train" / "data_tfrecord-00000-of-00001.gz", b"\x1f\x8b")
        elif type_name == "ExampleStatistics":
            _write(uri / "Split-train" / "FeatureStats.pb", _statistics(self.category))
        elif type_name == "Schema":
            _write(uri / "schema.pbtxt", b'feature { name: "payment_type" type: BYTES }\n')
        elif type_name == "tfxp.ValidationResult":
            cp["decision"].string_value = "PASS"
            cp["findings"].string_value = f"payment_type: new value {self.category}"
            _write(
                uri / "report.html", b"<!doctype html><title>report</title><p id=decision>PASS</p>"
            )
        elif type_name == "ModelBlessing":
            cp["blessed"].int_value = 1
        elif type_name == "PushedModel":
            cp["pushed"].int_value = 1
            cp["pushed_version"].string_value = str(1000 + self.runs)
            cp["pushed_destination"].string_value = str(
                self.root / "serving" / str(1000 + self.runs)
            )
        elif type_name == "ModelEvaluation" and metrics_uri:
            a.uri = metrics_uri
        elif type_name == "Model":
            _write(uri / "Format-Serving" / "saved_model.pb", b"model")
        return a


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _statistics(category: str) -> bytes:
    from tensorflow_metadata.proto.v0 import statistics_pb2

    stats = statistics_pb2.DatasetFeatureStatisticsList()
    ds = stats.datasets.add(num_examples=3000)
    f = ds.features.add()
    f.path.step.append("payment_type")
    f.string_stats.common_stats.num_non_missing = 3000
    f.string_stats.unique = 2
    for value, n in ((category, 2000), ("Cash", 1000)):
        f.string_stats.top_values.add(value=value, frequency=n)
    g = ds.features.add()
    g.path.step.append("fare")
    g.num_stats.common_stats.num_non_missing = 3000
    g.num_stats.min, g.num_stats.max, g.num_stats.mean = 0.0, 80.0, 12.5
    h = g.num_stats.histograms.add(type=statistics_pb2.Histogram.QUANTILES)
    for lo, hi in ((0.0, 5.0), (5.0, 12.0), (12.0, 80.0)):
        h.buckets.add(low_value=lo, high_value=hi, sample_count=1000)
    return stats.SerializeToString()


def write_runs(
    path: str | Path,
    runs: int,
    *,
    root: Path | None = None,
    pipeline: str = "taxi",
    category: str = "Cash",
    metrics_uri: str | None = None,
) -> Writer:
    """`runs` runs into the SQLite store at `path`: every third a cached rerun of the one before."""
    root = root or Path(path).parent
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    writer = Writer(open_sqlite(path), Path(root), pipeline, category)
    previous = None
    for i in range(runs):
        reuse = previous if (previous is not None and i % 3 == 2) else None
        out = writer.run(f"run-{i:05d}", span=1 + i // 3, reuse=reuse, metrics_uri=metrics_uri)
        previous = out
    return writer


def record_dvc_origin(store, root: Path, span: int, *, repo: str = "/srv/trips-repo") -> int:
    """A `tfxp data add --dvc` record for `span` of the synthetic data root (the same
    content sha256 the writer gives that span's Examples)."""
    from metadata import sources

    return sources.record(
        store,
        kind="dvc",
        pipeline="taxi",
        data_root=str(root / "data"),
        span=span,
        content_sha256=f"{span:02d}" + "cd" * 31,
        uri=str(root / "data" / f"span-{span}"),
        repo=repo,
        path="data/trips.csv",
        rev="v1",
        commit="0123456789abcdef0123456789abcdef01234567",
        dvc_md5="d9136e783f77f2c82d1fba0987993d9b",
        remote="/srv/dvc-remote",
    )
