"""Around a local run: the registry's alias for a push, and the run's alerts.

The runner calls these after the pipeline has finished (or failed); no
component waits on the network or on the registry. Nothing here may fail a
run that succeeded: problems are printed and written to the run's log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metadata.properties import prop
from pipeline.config import PipelineConfig
from runtime import alerts

Printer = Callable[[str], None]


def notifier(config: PipelineConfig, log_path: str | None) -> alerts.Notifier | None:
    """The run's notifier, or None when no webhook is configured."""
    hooks = alerts.webhooks(config.alert_webhook_env)
    if not hooks:
        return None
    return alerts.Notifier(hooks, alerts.file_logger(log_path), deadline=alerts.deadline_seconds())


def span_label(config: PipelineConfig) -> str:
    return "the latest span" if config.span is None else f"span {config.span}"


def _baseline_metrics(lineage: Any, model_id: int) -> dict[str, Any] | None:
    blessing = lineage.blessing(model_id)
    if blessing is None or not blessing.baseline_model_id:
        return None
    try:
        return lineage.metrics(int(blessing.baseline_model_id))
    except Exception:  # noqa: BLE001 - a moved pipeline root: the alert goes without
        return None


def _refusals(lineage: Any, run_id: str) -> list[tuple[str, Any]]:
    """(component, verdict artifact) for each component of this run that refused the model.

    Generic over "a component refused": any executed (not cached) component
    whose output carries `blessed` = 0, the convention of TFX's Evaluator
    (ModelBlessing) and InfraValidator (InfraBlessing) that serving checks follow.
    """
    from ml_metadata.proto import metadata_store_pb2 as pb

    found = []
    for ex in lineage.runs.get(run_id, []):
        if ex.last_known_state != pb.Execution.COMPLETE:
            continue
        for artifact in lineage.outputs(ex.id):
            if prop(artifact, "blessed") == 0:
                found.append((lineage.node_of.get(ex.id, "?"), artifact))
    return found


def _threshold_reason(config: PipelineConfig, metrics: dict[str, Any]) -> list[str]:
    t = config.thresholds
    value = metrics.get(t.metric)
    if not isinstance(value, int | float):
        return []
    reasons = []
    if t.lower_bound is not None and value < t.lower_bound:
        reasons.append(f"{t.metric} {value:.4f} is below the lower bound {t.lower_bound}")
    if t.upper_bound is not None and value > t.upper_bound:
        reasons.append(f"{t.metric} {value:.4f} is above the upper bound {t.upper_bound}")
    return reasons or [f"{t.metric} {value:.4f} did not beat the baseline by {t.min_change}"]


def after_run(store: Any, config: PipelineConfig, summary: Any, outcome: Any) -> list:
    """The alerts a finished run calls for: a push, or a refusal of the model."""
    from metadata.lineage import Lineage

    lineage = Lineage(store, config.pipeline_name)
    info = lineage.run_info(summary.run_id) if summary.run_id in lineage.runs else None
    model_id = info.model_id if info else None
    metrics = {k: v for k, v in (summary.metrics or {}).items() if isinstance(v, int | float)}
    baseline = _baseline_metrics(lineage, model_id) if model_id else None
    found: list[alerts.Alert] = []
    if outcome is not None:
        found.append(
            alerts.pushed(
                config.pipeline_name,
                summary.run_id,
                outcome.version.version,
                outcome.change.alias,
                metrics,
                baseline,
            )
        )
    for component, _ in _refusals(lineage, summary.run_id):
        reasons = _threshold_reason(config, metrics) if component == "Evaluator" else []
        found.append(
            alerts.refused(
                config.pipeline_name, summary.run_id, component, reasons, metrics, baseline
            )
        )
    return found


def finish(
    store: Any,
    config: PipelineConfig,
    summary: Any,
    send: alerts.Notifier | None,
    printer: Printer,
) -> None:
    """After a successful run: the push's alias, then the alerts. Never raises."""
    from tfxp.models import registry

    outcome = None
    try:
        outcome = registry.mark_push(config, store, summary.run_id)
    except Exception as e:  # noqa: BLE001 - the push itself is done; say what is missing
        printer(f"(could not set the registry alias of the pushed model: {e})")
    if outcome is not None:
        printer(
            f"registry: version {outcome.version.version} is now {outcome.change.alias} "
            f"({outcome.serving_path})"
        )
    if send is None:
        return
    try:
        for alert in after_run(store, config, summary, outcome):
            send.send(alert)
    except Exception as e:  # noqa: BLE001 - alerts must never fail a run
        send.log(f"could not prepare the run's alerts: {type(e).__name__}: {e}")
