"""`tfxp serve` against the floor and the naive server, at concurrency 1, 8 and 32.

    .venv/bin/python benchmarks/serving_load.py [--run-dir runs/taxi] [--seconds 5]
        [--concurrency 1 8 32] [--json]

One invocation measures, on the same pushed taxi model (the champion of
--run-dir; without one, a small pipeline is run in a temporary folder first):

  floor         the same `serving_default` signature called in this process:
                batch 1 (latency per call) and batched (batch = the highest
                concurrency: examples per second);
  ours          `tfxp serve` (REST, dynamic batching), request log off, and
                with every request logged (--log-fraction 1.0);
  naive         the server users write by hand: FastAPI, one model call per
                request (a `def` endpoint in FastAPI's thread pool, uvicorn).

Each server runs in a process of its own, all three started (and warmed up)
first; the load generator (this process) keeps C HTTP/1.1 keep-alive
connections busy with `:predict` requests of one tf.Example each, for
--seconds after a one-second warm-up, and counts only HTTP 200 answers. The
servers take turns at each concurrency, --rounds times, and the best round of
each is kept: on a shared machine the others' load drifts, and interleaving
spreads it over all three. It prints throughput and p50/p99 latency per point and the
ratios against the targets of issue #47:

  p50 overhead over the in-process batch-1 call at concurrency 1 <= 1 ms;
  throughput at the top concurrency >= 3x the naive server's and >= 0.5x the
  in-process batched floor; logging at fraction 1.0 costs <= 10% of throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

PATH = "/v1/models/taxi:predict"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


# -- the naive server (run as `serving.py --naive-server`)


def naive_server(model_dir: str, port: int) -> None:
    import tensorflow as tf
    import uvicorn
    from fastapi import FastAPI

    serve = tf.saved_model.load(model_dir).signatures["serving_default"]
    app = FastAPI()

    @app.get("/health")
    def health() -> dict:
        return {"ok": True}

    @app.post(PATH)
    def predict(body: dict) -> dict:
        examples = [base64.b64decode(i["b64"]) for i in body["instances"]]
        out = serve(examples=tf.constant(examples))
        return {"predictions": out["probability"].numpy().tolist()}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# -- load generation


def _request(body: bytes) -> bytes:
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _client(
    port: int, request: bytes, until: float, start_at: float, out: list, errors: list
):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while (now := time.perf_counter()) < until:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            if now >= start_at:
                if head.startswith(b"HTTP/1.1 200"):
                    out.append(time.perf_counter() - now)
                else:
                    errors.append(head.split(b"\r\n", 1)[0].decode())
                    if len(errors) == 1:
                        print(f"first error: {head!r}", file=sys.stderr)
    finally:
        writer.close()


def load(port: int, body: bytes, concurrency: int, seconds: float) -> dict:
    import uvloop

    async def main() -> tuple[list, list]:
        start_at = time.perf_counter() + 1.0  # warm-up second: not counted
        until = start_at + seconds
        latencies: list[float] = []
        errors: list[str] = []
        request = _request(body)
        await asyncio.gather(
            *(
                _client(port, request, until, start_at, latencies, errors)
                for _ in range(concurrency)
            )
        )
        return latencies, errors

    latencies, errors = uvloop.run(main())
    return {
        "concurrency": concurrency,
        "requests": len(latencies),
        "errors": len(errors),
        "throughput": len(latencies) / seconds,
        "p50_ms": percentile(latencies, 0.5) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
    }


def wait_ready(port: int, path: str, proc: subprocess.Popen, timeout: float = 180) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server on port {port} exited with {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}{path}").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"the server on port {port} did not become ready in {timeout:.0f} s")


def start_server(command: list[str], port: int, ready: str, body: bytes, args):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    try:
        wait_ready(port, ready, proc)
        load(port, body, max(args.concurrency), 2.0)  # warm-up, not counted: first calls trace
    except BaseException:
        proc.terminate()
        raise
    return proc


def measure_servers(servers: dict[str, int], body: bytes, args) -> dict[str, list[dict]]:
    """Every server at every concurrency, --rounds times interleaved (a busy machine's
    drift hits all of them alike); per point, the round with the best throughput."""
    out: dict[str, list[dict]] = {name: [] for name in servers}
    for c in args.concurrency:
        rounds: dict[str, list[dict]] = {name: [] for name in servers}
        for _ in range(args.rounds):
            for name, port in servers.items():
                rounds[name].append(load(port, body, c, args.seconds))
        for name, points in rounds.items():
            best = max(points, key=lambda p: p["throughput"])
            out[name].append({**best, "rounds": [round(p["throughput"]) for p in points]})
    return out


# -- the floor


def floor(model_dir: str, example: bytes, batch: int, seconds: float) -> dict:
    import tensorflow as tf

    serve = tf.saved_model.load(model_dir).signatures["serving_default"]
    one, many = tf.constant([example]), tf.constant([example] * batch)
    for x in (one, many):
        serve(examples=x)
    out = {}
    for name, x, n in (("batch_1", one, 1), (f"batch_{batch}", many, batch)):
        times = []
        until = time.perf_counter() + seconds
        while (start := time.perf_counter()) < until:
            serve(examples=x)["probability"].numpy()
            times.append(time.perf_counter() - start)
        out[name] = {
            "p50_ms": percentile(times, 0.5) * 1000,
            "examples_per_s": n * len(times) / sum(times),
        }
    return out


def pushed_model(args) -> tuple[str, str, Path]:
    """(run dir, champion's model dir, a CSV of rows to send); runs a small pipeline if needed."""
    from data.tables import small_config, write_sample
    from pipeline.datasets import dataset_config
    from serving import pointers

    if args.run_dir:
        config = dataset_config("taxi").replace(run_dir=args.run_dir)
        sample = Path(config.data_root) / "span-1" / "data.csv"
    else:
        tmp = Path(tempfile.mkdtemp(prefix="serving-bench-"))
        sample = write_sample(tmp / "data")
        config = small_config(tmp)
        from tfxp.local.runner import run_local

        run_local(config, printer=lambda _: None)
    pointer = pointers.read_pointer(config.serving_dir, "champion")
    if not pointer:
        raise SystemExit(f"no champion under {config.serving_dir}: run the pipeline first")
    return config.run_dir, os.path.join(config.serving_dir, pointer["version"]), sample


def first_example(csv_path: Path) -> bytes:
    from components.batch_inference import serving
    from components.validation.schema_importer import load_schema, schema_column_types
    from pipeline.datasets import dataset_config

    config = dataset_config("taxi")
    types = schema_column_types(load_schema(config.schema_file))
    types.pop(config.label_key, None)  # a request holds the features, not the label
    header, rows, _ = serving.csv_rows(str(csv_path))
    return serving.RowEncoder(header, types)(next(rows)[1])


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args) -> dict:
    run_dir, model_dir, csv_path = pushed_model(args)
    example = first_example(csv_path)
    body = json.dumps({"instances": [{"b64": base64.b64encode(example).decode()}]}).encode()
    top = max(args.concurrency)
    result: dict = {
        "model_dir": model_dir,
        "seconds": args.seconds,
        "concurrency": args.concurrency,
    }
    result["floor"] = floor(model_dir, example, top, args.seconds)
    log_dir = tempfile.mkdtemp(prefix="serving-bench-log-")
    commands = {
        name: [
            sys.executable,
            "-m",
            "tfxp.cli",
            "serve",
            "--run-dir",
            run_dir,
            "--port",
            "{port}",
            "--grpc-port",
            "0",
            "--log-fraction",
            fraction,
            "--log-dir",
            log_dir,
        ]  # fmt: skip
        for name, fraction in (("ours", "0"), ("ours_logged", "1.0"))
    }
    commands["naive"] = [sys.executable, __file__, "--naive-server", model_dir, "--port", "{port}"]
    ports, procs = {}, []
    try:
        for name, command in commands.items():
            ports[name] = _free_port()
            command = [a.replace("{port}", str(ports[name])) for a in command]
            ready = "/health" if name == "naive" else "/v1/health/ready"
            procs.append(start_server(command, ports[name], ready, body, args))
        result.update(measure_servers(ports, body, args))
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(30)
    failed = [
        (n, p) for n in ("ours", "ours_logged", "naive") for p in result[n] if not p["requests"]
    ]
    if failed:
        raise SystemExit(f"no request answered with 200: {failed}")
    result["ratios"] = ratios(result, top)
    return result


def ratios(r: dict, top: int) -> dict:
    def at(name: str, c: int) -> dict:
        return next(p for p in r[name] if p["concurrency"] == c)

    floor_1 = r["floor"]["batch_1"]["p50_ms"]
    floor_batched = r["floor"][f"batch_{top}"]["examples_per_s"]
    ours_top = at("ours", top)["throughput"]
    return {
        "p50_overhead_ms_c1": at("ours", 1)["p50_ms"] - floor_1 if 1 in r["concurrency"] else None,
        "vs_naive": ours_top / at("naive", top)["throughput"],
        "vs_floor_batched": ours_top / floor_batched,
        "logging_cost": 1 - at("ours_logged", top)["throughput"] / ours_top,
        "targets": {
            "p50_overhead_ms_c1": 1.0,
            "vs_naive": 3.0,
            "vs_floor_batched": 0.5,
            "logging_cost": 0.10,
        },  # fmt: skip
    }


def report(r: dict) -> str:
    lines = [f"{'server':<13} {'conc.':>5} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6}"]
    for name in ("ours", "ours_logged", "naive"):
        for p in r[name]:
            lines.append(
                f"{name:<13} {p['concurrency']:>5} {p['throughput']:>9.0f} {p['p50_ms']:>8.2f} "
                f"{p['p99_ms']:>8.2f} {p['errors']:>6}"
            )
    for name, f in r["floor"].items():
        lines.append(
            f"floor {name}: p50 {f['p50_ms']:.2f} ms, {f['examples_per_s']:.0f} examples/s"
        )
    q = r["ratios"]
    t = q["targets"]
    if q["p50_overhead_ms_c1"] is not None:
        lines.append(
            f"p50 overhead at concurrency 1: {q['p50_overhead_ms_c1']:.2f} ms "
            f"(target <= {t['p50_overhead_ms_c1']} ms)"
        )
    lines += [
        f"throughput vs naive: {q['vs_naive']:.2f}x (target >= {t['vs_naive']}x)",
        f"throughput vs in-process batched floor: {q['vs_floor_batched']:.2f}x (target >= {t['vs_floor_batched']}x)",
        f"logging at fraction 1.0 costs {q['logging_cost'] * 100:.1f}% of throughput (target <= {t['logging_cost'] * 100:.0f}%)",
    ]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--run-dir", help="a run whose champion to serve (default: a small new run)")
    p.add_argument("--seconds", type=float, default=5.0, help="measured seconds per point")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds per point (best kept)")
    p.add_argument("--json", action="store_true", help="print the results as JSON at the end")
    p.add_argument("--naive-server", metavar="MODEL_DIR", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.naive_server:
        naive_server(args.naive_server, args.port)
        return 0
    result = run(args)
    print(report(result), flush=True)
    if args.json:
        print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
