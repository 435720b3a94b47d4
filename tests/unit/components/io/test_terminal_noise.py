"""The terminal shows progress and results; TFDV's C++ warnings and TFX deprecations go to the log.

TFDV writes `statistics_view.cc ... GetByPath() can't find: tips` straight to
file descriptor 2 from C++ at the validation gate (the serving statistics have
no label). `components.io.native_stderr.native_stderr_to_log` moves such lines
into the Python log, i.e. the run's log file.
"""

from __future__ import annotations

import sys
import textwrap

from pipeline.config import PROJECT_ROOT
from pipeline.datasets import dataset_config
from pipeline.plan import plan_run

SCRIPT = textwrap.dedent(
    """
    import logging, sys
    import pandas as pd
    import tensorflow_data_validation as tfdv
    from absl import logging as absl_logging
    from components.io.native_stderr import native_stderr_to_log

    absl_logging.set_verbosity(absl_logging.INFO)
    # As the runner does: the terminal's handlers muted, "the log file" (stdout here) gets all.
    root = logging.getLogger()
    for handler in root.handlers:
        handler.setLevel(logging.ERROR)
    absl_logging.get_absl_handler().setLevel(logging.ERROR)
    root.addHandler(logging.StreamHandler(sys.stdout))
    train = pd.DataFrame({"a": [1.0, 2.0, 3.0], "tips": [0.0, 1.0, 0.0]})
    serving = pd.DataFrame({"a": [1.0, 2.5, 3.0]})  # serving data has no label
    ts = tfdv.generate_statistics_from_dataframe(train)
    ss = tfdv.generate_statistics_from_dataframe(serving)
    schema = tfdv.infer_schema(ts)
    tfdv.get_feature(schema, "tips").skew_comparator.infinity_norm.threshold = 0.1
    # One process, both ways (TFDV's import and statistics cost seconds): bare, then
    # wrapped, with a marker on both streams between them.
    tfdv.validate_statistics(ts, schema, serving_statistics=ss)
    for stream in (sys.stdout, sys.stderr):
        print(MARK, file=stream, flush=True)
    with native_stderr_to_log("TFDV"):
        tfdv.validate_statistics(ts, schema, serving_statistics=ss)
    print("validated", flush=True)
    """
)
MARK = "=== wrapped ==="


def test_tfdv_cpp_warnings_go_to_the_log_not_the_terminal(forkserver):
    # A process of its own (its fd 2 is the terminal), forked from the fork server.
    done = forkserver.run(
        [sys.executable, "-c", f"MARK = {MARK!r}\n{SCRIPT}"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    bare_err, wrapped_err = done.stderr.split(MARK + "\n")
    wrapped_out = done.stdout.split(MARK + "\n")[1]
    # The noise is real (else this test would prove nothing) ...
    assert "GetByPath() can't find: tips" in bare_err
    # ... and with the gate's wrapper it is off the terminal, in the log.
    assert "GetByPath" not in wrapped_err
    assert "TFDV (native stderr):" in wrapped_out and "can't find: tips" in wrapped_out
    assert "validated" in wrapped_out


def test_validation_gate_wraps_tfdv_in_the_redirect():
    import ast
    import inspect

    from components.validation import gate as validation_gate
    from components.validation import serving_data

    # The gate's calls into TFDV: computing the serving statistics (of the CSV or of
    # the request log) and running the checks.
    tfdv_calls = {"serving_statistics", "log_statistics", "evaluate"}
    trees = [ast.parse(inspect.getsource(m)) for m in (validation_gate, serving_data)]

    def redirected(node: ast.With) -> bool:
        return any(
            isinstance(c := item.context_expr, ast.Call)
            and isinstance(c.func, ast.Name)
            and c.func.id == "native_stderr_to_log"
            and [ast.literal_eval(a) for a in c.args] == ["TFDV"]
            for item in node.items
        )

    inside, outside = [], []

    def walk(node: ast.AST, in_redirect: bool) -> None:
        for child in ast.iter_child_nodes(node):
            here = in_redirect or (isinstance(child, ast.With) and redirected(child))
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Name)
                and child.func.id in tfdv_calls
            ):
                (inside if here else outside).append(f"{child.func.id} line {child.lineno}")
            walk(child, here)

    for tree in trees:
        walk(tree, False)
    assert not outside, f"TFDV called outside native_stderr_to_log: {outside}"
    # Every call is found (else the check above would pass vacuously).
    assert sorted(c.split()[0] for c in inside) == [
        "evaluate",
        "log_statistics",
        "serving_statistics",
    ], inside


def test_building_the_pipeline_logs_no_deprecation_warning(caplog):
    import logging

    from ml_metadata.proto import metadata_store_pb2

    from pipeline.definition import create_pipeline

    with caplog.at_level(logging.WARNING):
        create_pipeline(
            plan_run(dataset_config("taxi")),
            metadata_connection_config=metadata_store_pb2.ConnectionConfig(
                fake_database=metadata_store_pb2.FakeDatabaseConfig()
            ),
        )
    deprecated = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
    assert deprecated == []
