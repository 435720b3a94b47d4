"""`tfxp serve` under a `request_log:` hash policy, on the session's pushed taxi model:
it refuses to start without the key; with it, the log holds no raw value of a hashed
or dropped column, and the gate's skew check still compares the hashed columns (as
categories of their HMACs) with training data; a log hashed with another key is refused."""

from __future__ import annotations

import gzip
import os
import stat
from pathlib import Path

import httpx
import pytest
from serving_support import Running, raw_rows

from components.io.log_policy import Applier, LogPolicy, LogPolicyError

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

KEY = "0123456789abcdef0123456789abcdef"
POLICY = LogPolicy(hash=("company", "payment_type"), drop=("pickup_census_tract",))
HASHED = ("company", "payment_type")


@pytest.fixture(scope="module")
def logged(serving_run, tmp_path_factory):
    """40 taxi rows scored by a server with the policy; its log folder and the rows."""
    config = serving_run.config.replace(request_log=POLICY)
    folder = tmp_path_factory.mktemp("protected-log")
    os.environ.pop("TFXP_LOG_HASH_KEY", None)
    with pytest.raises(LogPolicyError, match="TFXP_LOG_HASH_KEY"):
        Running(config, log_dir=str(folder))
    os.environ["TFXP_LOG_HASH_KEY"] = KEY
    try:
        server = Running(config, log_dir=str(folder))
        try:
            _, objects = raw_rows(config, serving_run.csv_path)
            with httpx.Client(base_url=server.url, timeout=60) as client:
                for i in range(0, len(objects), 10):
                    answer = client.post(
                        "/v1/models/taxi:predict", json={"instances": objects[i : i + 10]}
                    )
                    assert answer.status_code == 200, answer.text
            server.server.request_log.rotate()
            published = list(server.server.request_log.published)
        finally:
            server.close()
        applier = Applier(POLICY)
    finally:
        os.environ.pop("TFXP_LOG_HASH_KEY", None)
    return config, folder, published, objects, applier


def test_the_log_holds_no_raw_value_of_hashed_or_dropped_columns(logged):
    _, _, published, objects, applier = logged
    assert published
    data = b"".join(gzip.decompress(Path(p).read_bytes()) for p in published)
    for name in HASHED:
        values = {str(o[name]).encode() for o in objects if o.get(name)}
        assert values
        leaked = [v for v in values if v in data]
        assert not leaked, f"raw {name} values in the log: {leaked[:3]}"
        assert all(applier.hashed([v])[0] in data for v in values)
    assert b"pickup_census_tract" not in data
    assert b"fare" in data  # kept columns are logged as sent
    assert all(stat.S_IMODE(os.stat(p).st_mode) == 0o600 for p in published)


def test_the_skew_check_compares_hashed_columns_and_refuses_another_key(logged, serving_run):
    from components.validation.checks import evaluate
    from components.validation.findings import SKEW
    from components.validation.hashed_columns import skew_view
    from components.validation.schema_importer import load_schema
    from components.validation.serving_data import load_serving_data, serving_statistics
    from components.validation.serving_log import ServingLogError, WindowOptions
    from components.validation.settings import load_settings

    config, folder, _, objects, applier = logged
    schema = load_schema(config.schema_file)
    window = WindowOptions(min_examples=1)
    serving = load_serving_data(schema, "", str(folder), window, applier)
    assert serving.window is not None and serving.rows == len(objects)
    # Training data: the very rows the server scored, so nothing may differ.
    training, _ = serving_statistics([str(serving_run.csv_path)], schema)
    settings = load_settings(config.validation_file)

    def skewed(view) -> set[str]:
        result = evaluate(
            {"train": training},
            schema,
            settings,
            serving=serving.statistics,
            serving_rows=serving.rows,
            serving_source=serving.source,
            skew_view=view,
        )
        return {f.feature for f in result.findings if f.kind == SKEW}, result.notes

    found, notes = skewed(skew_view(applier, []))
    assert not found & {*HASHED, "pickup_census_tract"}, found
    # Compared without the view, hashes against raw values: every hashed column skews.
    blind, _ = skewed(None)
    assert set(HASHED) <= blind, blind

    os.environ["TFXP_LOG_HASH_KEY"] = "another-key-of-32-characters-xyz"
    try:
        with pytest.raises(ServingLogError, match="another|policy"):
            load_serving_data(schema, "", str(folder), window, Applier(POLICY))
    finally:
        os.environ.pop("TFXP_LOG_HASH_KEY", None)
    with pytest.raises(ServingLogError, match="request-log policy"):
        load_serving_data(schema, "", str(folder), window, None)
