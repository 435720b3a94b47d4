"""Getting data in: the Trainer's input pipeline, CSV ingest, the data generator."""

from __future__ import annotations

from .tables import _num, _table, _verdict

# The benchmark's own order (a result file's keys may come sorted).
INPUT_ROWS = ("a", "b", "c", "d", "d_train", "d_block", "d_cached", "t", "e")


def _row_order(key: str) -> tuple[int, str]:
    return (INPUT_ROWS.index(key) if key in INPUT_ROWS else len(INPUT_ROWS), key)


def render_input_pipeline(result: dict) -> list[str]:
    rows = [
        [
            key,
            r["label"],
            _num(r["records_per_s"], 0),
            _num(r.get("best_s"), 2),
            _num(r.get("us_cpu_per_record"), 2),
        ]
        for key, r in sorted(result["results"].items(), key=lambda kv: _row_order(kv[0]))
    ]
    t = result["results"].get("t", {})
    ratios = ", ".join(f"{k} = {v:.2f}" for k, v in result["ratios"].items())
    targets = ", ".join(f"{k}: {_verdict(v)}" for k, v in result.get("targets", {}).items())
    return [
        f"{result['records']:,} records in {result['shards']} GZIP shards ({result['data_mb']} MB), "
        f"batch {result['batch_size']}, best of {result['repeats']} passes; TensorFlow "
        f"{result.get('tensorflow', '?')}.",
        "",
        *_table(["row", "pipeline", "records/s", "best pass s", "CPU µs/record"], rows),
        "",
        f"Ratios: {ratios}. Targets: {targets}.",
        f"Row t (the Trainer's own settings): cold first pass {_num(t.get('cold_records_per_s'), 0)} "
        f"records/s, warm (cached) passes {_num(t.get('records_per_s'), 0)}.",
        *_training_breakdown(result.get("training_breakdown")),
    ]


def _training_breakdown(parts: dict | None) -> list[str]:
    """Where the training configuration's time goes (row t split by row t_bytes)."""
    if not parts:
        return []
    lines = ["", "The training configuration's seconds per million records, by stage:", ""]
    for phase, label in (
        ("cold", "first epoch (from the shards)"),
        ("warm", "later epochs (cached)"),
    ):
        stages = ", ".join(f"{k.replace('_', ' ')} {v:.2f} s" for k, v in parts[phase].items())
        lines.append(f"- {label}: {stages}.")
    return lines


def render_csv_ingest(result: dict) -> list[str]:
    rows_n, csv_mb = result["rows"], result["csv_mb"]
    rows = []
    for reader, r in result["readers"].items():
        shards_mb = sum(s[3] for s in r["splits"].values()) / 1e6
        rows.append(
            [
                "arrow (default)" if reader == "arrow" else "tfx (TFX's CsvExampleGen)",
                f"{r['do']:.1f}",
                _num(round(rows_n / r["do"]), 0),
                f"{r['do_cpu']:.1f}",
                f"{r['wall']:.1f}",
                _num(round(r["peak"]), 0),
                _num(round(shards_mb), 0),
            ]
        )
    header = [
        "reader",
        "executor s",
        "rows/s",
        "executor CPU s",
        "process s",
        "peak RSS MB",
        "GZIP shards MB",
    ]
    return [
        f"{rows_n:,} generated rows, {csv_mb:.0f} MB of CSV, each reader in a fresh process"
        + (
            " (one child for both: a smoke run, not a measurement)"
            if result.get("one_child")
            else ""
        )
        + ".",
        "",
        *_table(header, rows),
        "",
        f"Speed-up of the executor: **{result['speedup_executor']:.1f}x** "
        f"({result['speedup_executor_without_checks']:.1f}x against TFX's CsvExampleGen without "
        f"this project's CSV checks); of the whole process {result['speedup_process']:.1f}x; "
        f"CPU time tfx / arrow {result['cpu_ratio']:.1f}x. Same examples per split (counts and "
        f"SHA-256 of the sorted examples): {'yes' if result['equivalent'] else 'NO'}.",
    ]


def render_generator(result: dict) -> list[str]:
    rows = [
        [
            _num(g["rows"], 0),
            f"{g['seconds']:.1f}",
            _num(g["rows_per_s"], 0),
            f"{g['mb_per_s']:.1f}",
            _num(g["peak_rss_mb"], 0),
        ]
        for g in result["generate"]
    ]
    return _table(["rows", "seconds", "rows/s", "MB/s of CSV", "peak RSS MB"], rows)
