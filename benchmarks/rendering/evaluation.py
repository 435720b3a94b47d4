"""Evaluation and models: slicing cost, the digits Evaluator, tuning, tabular quality."""

from __future__ import annotations

from .tables import _num, _table, _verdict


def render_slicing_cost(result: dict) -> list[str]:
    seconds = result["seconds"]
    rows = [
        [name, ", ".join(f"{s:.1f}" for s in runs), f"{result['best'][name]:.1f}"]
        for name, runs in seconds.items()
    ]
    ratios = "; ".join(f"{name}: {value:.2f}" for name, value in result["ratios"].items())
    return [
        *_table(["Evaluator (same model and data)", "runs (s)", "best (s)"], rows),
        "",
        f"{result['eval_rows']:,} eval rows of a {result['rows']:,}-row generated taxi span; "
        f"{ratios}.",
    ]


def render_digits_eval(result: dict) -> list[str]:
    """The digits Evaluator: the same rows as slicing_cost's table (runs, best), its own note."""
    lines = render_slicing_cost({**result, "rows": 0})
    ratios = "; ".join(f"{name}: {value:.2f}" for name, value in result["ratios"].items())
    lines[-1] = (
        f"The digits pipeline's Evaluator (per-digit slices) on its {result['eval_rows']:,} "
        f"eval images; {ratios}."
    )
    return lines


def render_tuning(result: dict) -> list[str]:
    rows = [
        [
            name,
            str(r["parallel_trials"]),
            _num(r["seconds"], 1),
            _num(r["trials_per_minute"], 2),
            _num(r["best_eval_loss"], 4),
        ]
        for name, r in result["results"].items()
    ]
    return [
        *_table(["search", "trials at once", "seconds", "trials/min", "best eval loss"], rows),
        "",
        f"{result['trials']} trials of {result['trial_steps']} steps on a {result['rows']:,}-row "
        f"generated taxi span, {result['cpus']} CPUs. Parallel / sequential trials per minute: "
        f"{result['parallel_vs_sequential']}x.",
    ]


def render_tabular_quality(result: dict) -> list[str]:
    """Per table: the MLP, gbt and default HistGradientBoosting; ours is the model init chose."""
    tables = result["tables"]

    def model(r: dict, name: str) -> str:
        bold = "**" if r["default_model"] == name else ""
        m = r[name]
        return f"{bold}{_num(m['value'], 4)}{bold} ({_num(m['vs_anchor'], 3)}, {_verdict(m['meets_target'])})"

    rows = [
        [
            name,
            r["metric"],
            f"{r['rows']['train']:,} / {r['rows']['eval']:,}",
            _num(r["anchor"], 4),
            model(r, "mlp"),
            model(r, "gbt"),
            r["default_model"],
            " / ".join(
                _num(v, 1)
                for v in (
                    r["mlp"].get("trainer_seconds"),
                    r["gbt"].get("trainer_seconds"),
                    r.get("anchor_fit_seconds"),
                )
            ),
        ]
        for name, r in tables.items()
    ]
    header = ["table", "metric", "rows train / eval", "HistGradientBoosting"]
    header += ["mlp (ratio, target)", "gbt (ratio, target)", "`tfxp init` chose"]
    header += ["seconds: mlp Trainer / gbt Trainer / HGB fit"]
    t = result["targets"]
    n = len(tables)
    return [
        *_table(header, rows),
        "",
        f"Target: accuracy at most {t['accuracy_points'] * 100:.0f} point below "
        f"HistGradientBoosting's, RMSE at most {(t['rmse_ratio'] - 1) * 100:.0f}% above it "
        f"(ratio: ours / HistGradientBoosting). Met by the model `tfxp init` chose (in bold) "
        f"on {result['ours_met']} of {n} tables, by the MLP on {result['mlp_met']}, by gbt on "
        f"{result['gbt_met']}. The tables:",
        "",
        *[f"- {name}: {r['about']}" for name, r in tables.items()],
    ]


def render_sequence_quality(result: dict) -> list[str]:
    """Each sequence model against HistGradientBoosting on per-sequence aggregates."""
    anchor = result["anchor"]
    rows = [
        [
            name,
            f"{_num(m['accuracy'], 4)} ({_num(m['accuracy_ratio'], 3)})",
            f"{_num(m['auc'], 4)} ({_num(m['auc_ratio'], 3)})",
            _num(m["blessed"]),
            _num(m["ingest_events_per_second"], 0),
            _num(m["input_sequences_per_second"], 0),
            _num(m["pipeline_seconds"], 0),
        ]
        for name, m in result["models"].items()
    ]
    rows.append(
        ["HistGradientBoosting on aggregates", _num(anchor["accuracy"], 4), _num(anchor["auc"], 4)]
        + ["", "", "", ""]
    )
    header = ["model", "accuracy (ours / HGB)", "ROC AUC (ours / HGB)", "blessed"]
    header += ["ingest events/s", "training input sequences/s", "pipeline seconds"]
    return [
        *_table(header, rows),
        "",
        f"{result['keys']:,} generated sessions ({result['events']:,} events; the label depends "
        f"on order and late events), {result['train_sequences']:,} train / "
        f"{result['eval_sequences']:,} eval sequences, the same split for every model. "
        "HistGradientBoosting (default settings) sees each sequence's length, the mean, std, "
        "min, max, first and last of each numeric per-step feature, each category's share and "
        "the first and last category, and the context features.",
    ]
