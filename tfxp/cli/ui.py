"""`tfxp ui`: the console, a read-only web app over ML Metadata and the run directory.

    tfxp ui [--run-dir DIR | --mysql-host H ...] [--host 127.0.0.1] [--port 8765]
            [--serving-url http://127.0.0.1:8501 [--sample-every 5] [--keep-samples 720]]

Binds 127.0.0.1 by default. Any other address needs an access token: one is
generated and printed (or give --token, --token-file FILE or TFXP_UI_TOKEN); requests without it get 401.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
import threading

from metadata.store import MetadataStoreError
from pipeline.datasets import DEFAULT_DATASET, dataset_config
from tfxp.cli.common import add_store_flags, store_location
from tfxp.monitor.sampler import DEFAULT_INTERVAL, DEFAULT_KEEP

DEFAULT_PORT = 8765
TOKEN_ENV = "TFXP_UI_TOKEN"  # noqa: S105 - the variable's name, not a token
SERVE_TOKEN_ENV = "TFXP_SERVE_TOKEN"  # noqa: S105 - tfxp/cli/serve.py's, for --serving-url


def _default_run_dir() -> str:
    return dataset_config(DEFAULT_DATASET).local_dir


def _import_tfma() -> None:
    # A failure here is the metrics page's to report, with what went wrong.
    with contextlib.suppress(Exception):
        import tensorflow_model_analysis  # noqa: F401


def cmd_ui(args: argparse.Namespace) -> int:
    import uvicorn

    from runtime.access import SecretFileError, is_loopback, new_token, read_token_file
    from tfxp.ui.app import create_app
    from tfxp.ui.browse import StoreBrowser

    try:
        location = store_location(args, _default_run_dir(), run_dir=args.run_dir)
    except MetadataStoreError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 2
    try:  # a clear line now, instead of uvicorn's after the banner
        with socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((args.host, args.port))
    except OSError as e:
        print(
            f"ERROR: cannot listen on {args.host}:{args.port} ({e.strerror}); "
            "pass another --port, or stop what uses it",
            file=sys.stderr,
        )
        return 2
    loopback = is_loopback(args.host)
    try:
        given = read_token_file(args.token_file) if args.token_file else args.token
    except SecretFileError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 2
    token = given or os.environ.get(TOKEN_ENV) or (None if loopback else new_token())
    browser = StoreBrowser(location)
    try:
        browser.refresh()  # say now, not on the first page, if the store cannot be read
    except MetadataStoreError as e:
        print(f"WARNING: {e}\n  (the console starts anyway and says so on every page)")
    sampler = None
    if args.serving_url:
        from tfxp.monitor.sampler import Sampler

        try:
            sampler = Sampler(
                args.serving_url,
                interval=args.sample_every,
                keep=args.keep_samples,
                # A server off loopback wants its token: the variable `tfxp serve` reads.
                token=os.environ.get(SERVE_TOKEN_ENV),
            )
        except ValueError as e:
            print(f"ERROR: {e}", file=sys.stderr)
            return 2
        sampler.start()
    app = create_app(browser, token=token, loopback=loopback and token is None, sampler=sampler)
    # Reading a model's metrics imports TensorFlow Model Analysis (~10 s once): start
    # it now, so the first page that shows metrics does not wait for all of it.
    threading.Thread(target=_import_tfma, daemon=True).start()
    # Every address (0.0.0.0, ::): print one another machine can open.
    shown = socket.gethostname() if args.host in ("0.0.0.0", "::") else args.host  # noqa: S104 - reads the user's choice
    shown = f"[{shown}]" if ":" in shown else shown
    address = f"http://{shown}:{args.port}/"
    print(f"tfxp console over {location.describe()}")
    print(f"  open {address}" + (f"?token={token}" if token else ""))
    if token and not given and not os.environ.get(TOKEN_ENV):
        print(f"  access token (generated): {token}")
    if sampler is not None:
        print(
            f"  sampling {sampler.url} every {sampler.interval:g} s "
            f"(the last {sampler.keep} samples kept) for the Serving page's charts"
        )
    print("  read-only; Ctrl-C stops it", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ui", help="the console: a web page of runs, graphs, artifacts, lineage")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    p.add_argument(
        "--token",
        help=f"access token for non-loopback addresses (env {TOKEN_ENV}; default: generated)",
    )
    p.add_argument(
        "--token-file",
        metavar="FILE",
        help="read the access token from FILE (owner-only: refused if group or others may read it)",
    )
    p.add_argument(
        "--serving-url",
        metavar="URL",
        help="a `tfxp serve` address (e.g. http://127.0.0.1:8501) whose metrics the console "
        f"samples in the background for the Serving page's charts over time ({SERVE_TOKEN_ENV}: "
        "its access token, if it needs one)",
    )
    p.add_argument(
        "--sample-every",
        type=float,
        default=DEFAULT_INTERVAL,
        metavar="SECONDS",
        help=f"seconds between samples of --serving-url (default {DEFAULT_INTERVAL:g})",
    )
    p.add_argument(
        "--keep-samples",
        type=int,
        default=DEFAULT_KEEP,
        metavar="N",
        help=f"samples kept in memory, the oldest dropped first (default {DEFAULT_KEEP})",
    )
    add_store_flags(p, default_run_dir_help=f" (default: runs/{DEFAULT_DATASET})")
    p.set_defaults(func=cmd_ui)
