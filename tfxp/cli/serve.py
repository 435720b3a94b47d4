"""`tfxp serve`: the pushed models online, with TF Serving's REST and gRPC APIs.

    tfxp serve [--dataset taxi] [--run-dir DIR] [--host 127.0.0.1] [--port 8501]
               [--grpc-port 8500] [--max-batch-size 64] [--batch-timeout-ms 0]
               [--log-fraction 1.0] [--shadow | --split challenger=10]

Serves `<serving>/<version>` as the Pusher wrote it, the champion and
challenger labels as `tfxp models` sets them, and follows pushes, promotes and
rollbacks without a restart (docs/serving.md). Binds 127.0.0.1 by default;
any other address needs an access token (--token, --token-file FILE readable
by its owner only, env TFXP_SERVE_TOKEN, or one generated and printed).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys

from tfxp.cli.common import add_config_flags, config_from_args

TOKEN_ENV = "TFXP_SERVE_TOKEN"  # noqa: S105 - the variable's name, not a token


def _port_free(host: str, port: int) -> str | None:
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as e:
        return f"cannot listen on {host}:{port} ({e.strerror}); pass another port, or stop what uses it"
    return None


def options_from_args(args: argparse.Namespace):
    from serving.server import ServeOptions

    return ServeOptions(
        host=args.host,
        port=args.port,
        grpc_port=None if args.grpc_port == 0 else args.grpc_port,
        token=args.token or os.environ.get(TOKEN_ENV),  # --token-file: cmd_serve reads it
        max_batch_size=args.max_batch_size,
        batch_timeout_ms=args.batch_timeout_ms,
        poll_seconds=args.poll_seconds,
        max_request_bytes=args.max_request_bytes,
        log_fraction=args.log_fraction,
        log_dir=args.log_dir,
        log_max_bytes=args.log_max_mb * 1024 * 1024,
        log_max_seconds=args.log_max_seconds,
        shadow=args.shadow,
        split=args.split,
    )


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from components.io.log_policy import LogPolicyError
    from runtime.access import is_loopback, new_token
    from serving.security import PROXY_HELP
    from serving.server import Server
    from serving.service import Split

    # Beam warns about crcmod at import although it uses google-crc32c instead.
    logging.getLogger().addFilter(lambda r: not str(r.msg).startswith("crcmod package not found"))
    from runtime.access import SecretFileError, read_token_file

    config = config_from_args(args)
    options = options_from_args(args)
    try:
        if args.token_file:
            options.token = read_token_file(args.token_file)
    except SecretFileError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 2
    if not is_loopback(options.host) and options.token is None:
        if args.no_token:
            print(f"ERROR: --no-token is refused off loopback; {PROXY_HELP}", file=sys.stderr)
            return 2
        options.token = new_token()
    try:
        if options.split:
            Split.parse(options.split)
        if options.shadow and options.split:
            raise ValueError("--shadow and --split are two kinds of A/B test: choose one")
    except ValueError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 2
    for port in (options.port, options.grpc_port):
        problem = port and _port_free(options.host, port)
        if problem:
            print(f"ERROR: {problem}", file=sys.stderr)
            return 2
    model = args.model_name or args.dataset
    print(f"tfxp serve: loading {model} from {config.serving_dir} ...", flush=True)
    try:
        server = Server(config, options, model)
    except (LogPolicyError, ValueError) as e:  # the request log's policy, key or folder
        print(f"ERROR: {e}", file=sys.stderr)
        return 2
    server.load()
    state = server.repository.state
    if not state.versions:
        print(
            f"  no pushed version under {config.serving_dir} yet: serving nothing until one "
            "appears (run the pipeline: `make run`)"
        )
    for v, lv in sorted(state.versions.items()):
        labels = [k for k, n in state.labels.items() if n == v]
        print(f"  version {v} AVAILABLE ({lv.warmup_records} warmup requests){_labels(labels)}")
    grpc_port = server.start_grpc()
    shown = f"[{options.host}]" if ":" in options.host else options.host
    print(f"  REST  http://{shown}:{options.port}/v1/models/{model}")
    if grpc_port:
        print(f"  gRPC  {shown}:{grpc_port} (tensorflow_serving.apis PredictionService)")
    print(f"  metrics http://{shown}:{options.port}/monitoring/prometheus/metrics")
    if server.request_log is not None:
        print(f"  request log ({options.log_fraction:g} of requests): {server.request_log.folder}")
        if config.request_log is not None:
            p = config.request_log
            print(
                f"  request-log policy {server.request_log.policy.fingerprint}: hash "
                f"{list(p.hash)}, drop {list(p.drop)}, other columns: {p.others}"
            )
    if options.token and not (args.token or args.token_file or os.environ.get(TOKEN_ENV)):
        print(f"  access token (generated): {options.token}  (Authorization: Bearer ...)")
    print("  Ctrl-C stops it", flush=True)
    uv = uvicorn.Server(server.uvicorn_config())
    signal.signal(signal.SIGTERM, lambda *_: setattr(uv, "should_exit", True))
    try:
        uv.run()
    finally:
        server.close()
    return 0


def _labels(labels: list[str]) -> str:
    return f" as {', '.join(sorted(labels))}" if labels else ""


def register(sub: argparse._SubParsersAction) -> None:
    from serving.batching import DEFAULT_MAX_BATCH_SIZE
    from serving.server import DEFAULT_GRPC_PORT, DEFAULT_PORT

    p = sub.add_parser("serve", help="serve the pushed models (TF Serving's REST and gRPC APIs)")
    add_config_flags(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"REST port ({DEFAULT_PORT})")
    p.add_argument(
        "--grpc-port",
        type=int,
        default=DEFAULT_GRPC_PORT,
        help=f"gRPC port ({DEFAULT_GRPC_PORT}; 0: no gRPC)",
    )
    p.add_argument("--model-name", help="the name clients use (default: the dataset's name)")
    p.add_argument(
        "--token", help=f"access token required off loopback (env {TOKEN_ENV}; default: generated)"
    )
    p.add_argument(
        "--token-file",
        metavar="FILE",
        help="read the access token from FILE (owner-only: refused if group or others may read it)",
    )
    p.add_argument(
        "--no-token",
        action="store_true",
        help="refuse to start off loopback instead of generating a token",
    )
    b = p.add_argument_group("batching and limits")
    b.add_argument(
        "--max-batch-size",
        type=int,
        default=DEFAULT_MAX_BATCH_SIZE,
        help=f"most examples per model call ({DEFAULT_MAX_BATCH_SIZE})",
    )
    b.add_argument(
        "--batch-timeout-ms",
        type=float,
        default=0.0,
        help="wait up to this long for a fuller batch (default 0: batch what is queued)",
    )
    b.add_argument(
        "--max-request-bytes",
        type=int,
        default=16 * 1024 * 1024,
        help="larger request bodies get 413 (default 16 MiB)",
    )
    b.add_argument(
        "--poll-seconds",
        type=float,
        default=1.0,
        help="how often the serving folder and aliases are read (default 1)",
    )
    g = p.add_argument_group("request log (the dataset's serving-log folder)")
    g.add_argument(
        "--log-fraction",
        type=float,
        default=1.0,
        help="share of requests written to the request log (default 1.0; 0: none)",
    )
    g.add_argument("--log-dir", help="default: <data root>/serving-log")
    g.add_argument("--log-max-mb", type=int, default=64, help="rotate files at this size (64)")
    g.add_argument(
        "--log-max-seconds", type=float, default=300.0, help="and at this age (default 300)"
    )
    ab = p.add_argument_group("A/B between champion and challenger")
    ab.add_argument(
        "--shadow",
        action="store_true",
        help="also score every logged request with the challenger (logged, not returned)",
    )
    ab.add_argument(
        "--split",
        metavar="LABEL=PERCENT",
        help="send this share of requests to a label, e.g. challenger=10 "
        "(sticky by the X-Request-Key header when given)",
    )
    p.set_defaults(func=cmd_serve)
