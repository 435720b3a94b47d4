"""A bounded fuzz of `tfxp serve`'s HTTP API (hypothesis, loopback): whatever the path,
method and body, the answer is never a 5xx, an error is JSON with `error`, and the server
keeps serving."""

from __future__ import annotations

import json
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serving_support import Running

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
FEATURES = [
    "fare", "trip_miles", "trip_seconds", "trip_start_hour", "payment_type", "company",
    "tips", "pickup_latitude", "unknown",
]  # fmt: skip

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.fixed_dictionaries({"b64": st.text(max_size=12)}),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(FEATURES) | st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
examples = st.lists(st.dictionaries(st.sampled_from(FEATURES), json_values, max_size=6), max_size=3)
bodies = st.one_of(
    json_values,
    st.fixed_dictionaries({"instances": examples | json_values}),
    st.fixed_dictionaries({"inputs": json_values}),
    st.fixed_dictionaries({"examples": examples | json_values}, optional={"context": json_values}),
    st.fixed_dictionaries({"signature_name": st.text(max_size=8), "instances": examples}),
)
segments = st.sampled_from(["taxi", "nope", "1", "champion", "challenger", ""]) | st.text(
    max_size=8
)
paths = st.tuples(
    st.sampled_from(
        [
            "/v1/models/{}",
            "/v1/models/taxi/versions/{}",
            "/v1/models/taxi/labels/{}",
            "/{}",
            "/v1/{}/taxi",
        ]
    ),  # fmt: skip
    segments,
    st.sampled_from(["", ":predict", ":classify", ":regress", "/metadata", ":x", "/"]),
).map(lambda t: t[0].format(quote(t[1], safe="")) + t[2])


@pytest.fixture(scope="module")
def server(serving_run):
    running = Running(serving_run.config, log_fraction=0, max_request_bytes=64 * 1024)
    yield running
    running.close()


@settings(
    max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)
@given(
    method=st.sampled_from(["GET", "POST", "PUT"]),
    path=paths,
    body=bodies | st.binary(max_size=64),
)
def test_no_input_makes_a_5xx(server, method, path, body) -> None:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = httpx.request(method, server.url + path, content=content, timeout=30)
    assert r.status_code < 500, (method, path, body, r.text)
    if r.status_code >= 400:
        assert isinstance(r.json()["error"], str) and r.json()["error"]


def test_it_still_serves_after_the_fuzz(server) -> None:
    assert httpx.get(f"{server.url}/v1/health/ready").status_code == 200
    page = httpx.get(f"{server.url}/monitoring/prometheus/metrics").text
    assert 'code="5' not in page
