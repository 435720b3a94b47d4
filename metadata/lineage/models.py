"""Lineage queries about models: which data, code and settings made a model, its verdicts
and pushes, and which models a span's data trained.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ml_metadata.proto import metadata_store_pb2 as pb

from metadata import aliases
from metadata.lineage.core import LineageCore
from metadata.lineage.records import (
    INPUT_EVENTS,
    OUTPUT_EVENTS,
    Blessing,
    DataVersion,
    ModelLineage,
    ModelUse,
    Push,
    RunInfo,
    iso_time,
)
from metadata.properties import event_key, prop
from metadata.properties import json_prop as _json
from metadata.store import LineageError
from pipeline.node_ids import (
    EVALUATOR,
    EXAMPLE_GENS,
    PUSHER,
    SCHEMA_IMPORTER,
    TRAINER,
    TRANSFORM,
)


class ModelQueries(LineageCore):
    """Lineage queries about models: which data, code and settings made a model, its verdicts (a part of metadata.lineage.Lineage, whose other
    parts' methods it may call)."""

    if TYPE_CHECKING:  # the other parts' methods it calls (runs.py, spans.py)

        def resolve_run(self, ref: str) -> str: ...
        def run_info(self, run_id: str) -> RunInfo: ...
        def data_version(self, examples: pb.Artifact) -> DataVersion: ...

    def models(self) -> list[pb.Artifact]:
        ids = set()
        for ex in self.executions.values():
            if self.node_of[ex.id] == TRAINER:
                ids.add(ex.id)
        out = []
        for eid in sorted(ids):
            out.extend(self.outputs(eid, "Model"))
        return sorted({a.id: a for a in out}.values(), key=lambda a: a.id)

    def resolve_model(self, ref: str) -> pb.Artifact:
        models = self.models()
        if not models:
            raise LineageError(
                f"pipeline '{self.pipeline}' has no trained model in {self.where}; "
                "run the pipeline (tfxp run)"
            )
        if ref == "latest":
            return models[-1]
        if ref == "pushed":
            pushed = [
                (push.pushed_model_id, m)
                for m in models
                for push in self.pushes(m.id)
                if push.pushed
            ]
            if not pushed:
                raise LineageError(
                    f"no model of pipeline '{self.pipeline}' was pushed yet in {self.where}; "
                    "`tfxp lineage model latest` shows the newest one"
                )
            return max(pushed, key=lambda pm: pm[0])[1]
        if ref.isdigit():
            by_id = {m.id: m for m in models}
            if int(ref) in by_id:
                return by_id[int(ref)]
            known = ", ".join(str(m.id) for m in models[-5:])
            raise LineageError(
                f"no Model artifact {ref} of pipeline '{self.pipeline}' in {self.where} "
                f"(newest model ids: {known}); use latest, pushed, a model id or a run id"
            )
        held = aliases.current(self.store, self.pipeline, ref)
        if held is not None:  # a registry alias: champion, challenger, ...
            model = self.artifact(held.model_id)
            if model is not None:
                return model
        run_id = self.resolve_run(ref)
        info = self.run_info(run_id)
        if info.model_id is None:
            raise LineageError(
                f"run {run_id} trained no model (partial or failed run); pick another run "
                "from `tfxp runs list`"
            )
        return self.artifact(info.model_id)

    def blessing(self, model_id: int) -> Blessing | None:
        found: list[tuple[pb.Artifact, pb.Execution]] = []
        for ex in self._consumers(model_id, "model"):
            if self.node_of.get(ex.id) != EVALUATOR:
                continue
            for b in self.outputs(ex.id, "ModelBlessing"):
                if prop(b, "current_model_id") in (None, model_id):
                    found.append((b, self.producer(b.id) or ex))
        if not found:
            return None
        b, ex = sorted(found, key=lambda be: be[0].id)[-1]
        return Blessing(
            blessed=prop(b, "blessed") == 1,
            blessing_id=b.id,
            baseline_model_id=prop(b, "baseline_model_id"),
            run_id=self.run_of.get(ex.id),
            message=prop(b, "blessing_message") or None,
        )

    def evaluation(self, model_id: int) -> pb.Artifact | None:
        for ex in sorted(self._consumers(model_id, "model"), key=lambda e: -e.id):
            if self.node_of.get(ex.id) == EVALUATOR:
                evals = self.outputs(ex.id, "ModelEvaluation")
                if evals:
                    return evals[-1]
        return None

    def pushes(self, model_id: int) -> list[Push]:
        seen: dict[int, Push] = {}
        for ex in self._consumers(model_id, "model"):
            if self.node_of.get(ex.id) != PUSHER:
                continue
            for p in self.outputs(ex.id, "PushedModel"):
                writer = self.producer(p.id) or ex
                version = prop(p, "pushed_version")
                seen[p.id] = Push(
                    pushed=prop(p, "pushed") == 1,
                    pushed_model_id=p.id,
                    destination=prop(p, "pushed_destination") or None,
                    version=str(version) if version not in (None, "") else None,
                    run_id=self.run_of.get(writer.id),
                )
        return [seen[k] for k in sorted(seen)]

    def model_lineage(self, model: pb.Artifact, *, with_metrics: bool = True) -> ModelLineage:
        steps, by_node, raw, writers = self._producers_upstream(model)
        self._walks[model.id] = steps
        schema_exec, transform_exec = by_node.get(SCHEMA_IMPORTER), by_node.get(TRANSFORM)
        trainer_exec = by_node.get(TRAINER)
        reused = sorted(
            {self.run_of[x] for x in writers if x in self.run_of}
            - {self.run_of.get(trainer_exec.id) if trainer_exec else None}
        )
        schema: dict[str, Any] = {}
        if schema_exec is not None:
            schema_art = [a for a in self.outputs(schema_exec.id, "Schema")]
            schema = {
                "content_sha256": prop(schema_exec, "content_sha256"),
                "file": prop(schema_exec, "schema_file"),
                "schema_id": schema_art[0].id if schema_art else None,
            }
        lineage = ModelLineage(
            pipeline=self.pipeline,
            model_id=model.id,
            model_uri=model.uri,
            created=iso_time(model.create_time_since_epoch),
            trained_in_run=self.run_of.get(trainer_exec.id) if trainer_exec else None,
            reused_by_runs=reused,
            data=[self.data_version(a) for a in sorted(raw, key=lambda a: a.id)],
            schema=schema,
            transform=self.component_facts(transform_exec),
            trainer=self.component_facts(trainer_exec),
            blessing=self.blessing(model.id),
            metrics=self.metrics(model.id) if with_metrics else {},
            pushes=self.pushes(model.id),
            aliases=[
                c.to_dict()
                for c in aliases.history(self.store, self.pipeline)
                if model.id in (c.model_id, c.previous_model_id)
            ],
        )
        return lineage

    def _producers_upstream(self, model: pb.Artifact):
        """Walks producers from the model back to ExampleGen's Examples: (steps,
        {node id: execution} for the schema import, Transform and the Trainer,
        the raw Examples, the executions that wrote the model: its run and cached re-uses)."""
        graph = self.upstream(model.id)
        writers: dict[int, list[int]] = defaultdict(list)
        inputs: dict[int, list[tuple[int, str]]] = defaultdict(list)
        for ev in graph.events:
            if ev.type in OUTPUT_EVENTS:
                writers[ev.artifact_id].append(ev.execution_id)
            elif ev.type in INPUT_EVENTS:
                inputs[ev.execution_id].append((ev.artifact_id, event_key(ev)))
        executions = {e.id: e for e in graph.executions if e.id in self.executions}

        def producer_of(aid: int) -> pb.Execution | None:
            cands = [executions[x] for x in writers.get(aid, []) if x in executions]
            complete = [c for c in cands if c.last_known_state == pb.Execution.COMPLETE]
            chosen = sorted(complete or cands, key=lambda c: c.id)
            return chosen[0] if chosen else None

        steps: list[tuple[pb.Execution, list[tuple[int, str]], list[int]]] = []
        seen_art: set[int] = set()
        seen_exec: set[int] = set()
        frontier = [model.id]
        raw: list[pb.Artifact] = []
        by_node: dict[str, pb.Execution] = {}
        while frontier:
            aid = frontier.pop()
            if aid in seen_art:
                continue
            seen_art.add(aid)
            ex = producer_of(aid)
            if ex is None:
                continue
            node = self.node_of.get(ex.id, "?")
            if ex.id not in seen_exec:
                seen_exec.add(ex.id)
                steps.append((ex, inputs.get(ex.id, []), []))
                frontier.extend(a for a, _ in inputs.get(ex.id, []))
            for s in steps:
                if s[0].id == ex.id:
                    s[2].append(aid)
            if node in EXAMPLE_GENS or "ExampleGen" in self.exec_type(ex):
                raw.extend(self.artifacts([aid]))
            elif node in (SCHEMA_IMPORTER, TRANSFORM) or (node == TRAINER and aid == model.id):
                by_node[node] = ex
        return steps, by_node, raw, writers.get(model.id, [])

    def producer_steps(
        self, model: pb.Artifact
    ) -> list[tuple[pb.Execution, list[tuple[int, str]], list[int]]]:
        """The executions from the model back to its data: (execution, inputs, outputs)."""
        if model.id not in self._walks:
            self._walks[model.id] = self._producers_upstream(model)[0]
        return self._walks[model.id]

    def metrics(self, model_id: int) -> dict[str, float]:
        evaluation = self.evaluation(model_id)
        if evaluation is None:
            return {}
        from metadata.summary import read_eval_metrics

        quiet_tensorflow()
        try:
            found = read_eval_metrics(evaluation.uri)
        except Exception as e:  # noqa: BLE001 - a moved or deleted pipeline root
            raise LineageError(
                f"cannot read the evaluation of model {model_id} at {evaluation.uri} "
                f"({str(e).splitlines()[0][:120]}); was the pipeline root moved or deleted?"
            ) from None
        return {k: round(v, 6) for k, v in sorted(found.items())}

    def component_facts(self, ex: pb.Execution | None) -> dict[str, Any]:
        """What the execution recorded of its code and settings (code fingerprint,
        hyperparameters, train/eval steps), for a model's lineage."""
        if ex is None:
            return {}
        config = _json(prop(ex, "custom_config")) or {}
        facts: dict[str, Any] = {
            "execution_id": ex.id,
            "run_id": self.run_of.get(ex.id),
            "code_fingerprint": config.get("code_fingerprint"),
        }
        for key in ("preprocessing_fn", "run_fn", "module_file"):
            if prop(ex, key):
                facts["code"] = prop(ex, key)
        if self.node_of.get(ex.id) == TRAINER:
            hyper = dict(config.get("hyperparameters") or {})
            for key, name in (("train_args", "train_steps"), ("eval_args", "eval_steps")):
                steps = (_json(prop(ex, key)) or {}).get("num_steps")
                if steps is not None:
                    hyper[name] = steps
            facts["hyperparameters"] = dict(sorted(hyper.items()))
        return facts

    def models_trained_on(self, examples: Sequence[pb.Artifact]) -> list[ModelUse]:
        """The models whose training data includes any of `examples` (ingested Examples)."""
        query = pb.LineageSubgraphQueryOptions(
            max_num_hops=8, direction=pb.LineageSubgraphQueryOptions.DOWNSTREAM
        )
        query.starting_artifacts.filter_query = (
            "id IN (" + ", ".join(str(a.id) for a in examples) + ")"
        )
        graph = self.store.get_lineage_subgraph(query, field_mask_paths=["artifacts"])
        candidates = sorted(
            (a for a in graph.artifacts if self._atype.get(a.type_id) == "Model"),
            key=lambda a: a.id,
        )
        wanted = {a.id for a in examples}
        uses = []
        for model in candidates:
            lineage = self.model_lineage(model, with_metrics=False)
            if not wanted & {d.examples_id for d in lineage.data}:
                continue  # downstream only as some other model's baseline
            uses.append(ModelUse.of(lineage))
        return uses


def quiet_tensorflow() -> None:
    """TFMA's import prints deprecation chatter that would bury a query's answer."""
    import logging
    import warnings

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    for category in (FutureWarning, DeprecationWarning, UserWarning):
        warnings.filterwarnings("ignore", category=category)
    import tensorflow as tf

    tf.get_logger().setLevel(logging.ERROR)
