"""Using a model: the console (`tfxp ui`), batch inference, online serving."""

from __future__ import annotations

from .tables import _num, _table, _verdict


def render_ui(result: dict) -> list[str]:
    rows = [
        [name, f"{p['p50_ms']:.1f} ms", f"{p['p95_ms']:.1f} ms"]
        for name, p in result["pages"].items()
    ]
    rows += [
        ["first runs page after start (reads every run)", f"{result['first_page_ms']:.1f} ms", ""],
        ["runs page after another run wrote", f"{result['after_write_ms']:.1f} ms", ""],
    ]
    rows += [[f"{name}, once, cold", f"{ms:.1f} ms", ""] for name, ms in result["once_ms"].items()]
    return [
        *_table(["page (server time)", "p50", "p95"], rows),
        "",
        f"{result['runs']:,} runs, {result['requests']} requests per page. The anchor, "
        f"`tfxp runs list`'s read of every run, took {result['anchor_runs_list_ms']:.0f} ms: "
        f"{result['ratio']:.1f}x the runs page's p95 (target p95: under "
        f"{result['target_p95_ms']:.0f} ms).",
    ]


def render_batch_inference(result: dict) -> list[str]:
    labels = {
        "ours": "`tfxp infer`",
        "predict": "`tfxp predict`",
        "tfx_bulk_inferrer": "TFX BulkInferrer (executor)",
    }
    rows = [
        [
            labels.get(name, name),
            _num(r["seconds"], 2),
            _num(r["cpu_seconds"], 2),
            _num(r["rows_per_s"], 0),
            _num(r["rows_per_cpu_s"], 0),
            _num(r["peak_rss_mb"], 0),
        ]
        for name, r in result["results"].items()
    ]
    return [
        *_table(["", "seconds", "CPU seconds", "rows/s", "rows/CPU-s", "peak RSS MB"], rows),
        "",
        f"{result['rows']:,} generated taxi rows, best of {result['repeat']} interleaved "
        f"rounds. `tfxp infer` / `tfxp predict`: {result['ours_vs_predict']}x rows/s "
        f"({result['ours_vs_predict_cpu']}x per CPU-second); / BulkInferrer: "
        f"{result['ours_vs_bulk_inferrer']}x ({result['ours_vs_bulk_inferrer_cpu']}x). "
        "BulkInferrer reads the rows already encoded as TFRecords; ours reads the CSV.",
    ]


def render_serving(result: dict) -> list[str]:
    names = {"ours": "`tfxp serve`", "ours_logged": "`tfxp serve`, every request logged",
             "naive": "naive FastAPI, one call per request"}  # fmt: skip
    rows = [
        [
            names[n],
            str(p["concurrency"]),
            _num(p["throughput"], 0),
            f"{p['p50_ms']:.2f}",
            f"{p['p99_ms']:.2f}",
            str(p["errors"]),
        ]  # fmt: skip
        for n in ("ours", "ours_logged", "naive")
        for p in result[n]
    ]
    floor = [
        f"{name.replace('_', ' ')}: p50 {f['p50_ms']:.2f} ms, {_num(f['examples_per_s'], 0)} examples/s"
        for name, f in result["floor"].items()
    ]
    q, t = result["ratios"], result["ratios"]["targets"]
    return [
        *_table(["server", "concurrency", "requests/s", "p50 ms", "p99 ms", "errors"], rows),
        "",
        f"`:predict` with one taxi example per request, {result['seconds']:.0f} s per point after a "
        "warm-up. The floor, the same signature called in-process: " + "; ".join(floor) + ".",
        "",
        *_table(
            ["against the targets", "measured", "target", "met"],
            [
                [
                    "p50 overhead over the in-process batch-1 call, concurrency 1",
                    f"{q['p50_overhead_ms_c1']:.2f} ms",
                    f"<= {t['p50_overhead_ms_c1']} ms",
                    _verdict(q["p50_overhead_ms_c1"] <= t["p50_overhead_ms_c1"]),
                ],
                [
                    "throughput against the naive server, top concurrency",
                    f"{q['vs_naive']:.2f}x",
                    f">= {t['vs_naive']}x",
                    _verdict(q["vs_naive"] >= t["vs_naive"]),
                ],
                [
                    "throughput against the in-process batched floor",
                    f"{q['vs_floor_batched']:.2f}x",
                    f">= {t['vs_floor_batched']}x",
                    _verdict(q["vs_floor_batched"] >= t["vs_floor_batched"]),
                ],
                [
                    "throughput lost to the request log at fraction 1.0",
                    f"{q['logging_cost'] * 100:.1f}%",
                    f"<= {t['logging_cost'] * 100:.0f}%",
                    _verdict(q["logging_cost"] <= t["logging_cost"]),
                ],
            ],  # fmt: skip
        ),
    ]
