"""components/validation/table_checks.py: a date column whose format changed, an id that is
constant at serving; on TFDV's statistics of small tables."""

from __future__ import annotations

import pandas as pd
import pytest

from components.validation import table_checks
from components.validation.findings import BLOCK, WARN
from components.validation.settings import ValidationSettings


def _stats(frame: pd.DataFrame):
    import tensorflow_data_validation as tfdv

    return tfdv.generate_statistics_from_dataframe(frame)


@pytest.mark.parametrize(
    "value, fmt, ok",
    [
        ("2021-03-04", "iso", True),
        ("2021-03-04T10:00:00+01:00", "iso", True),
        ("04/03/2021", "iso", False),
        ("31/03/2021", "dmy", True),
        ("31/03/2021", "mdy", False),
        ("03/31/2021", "mdy", True),
        ("1700000000", "unix_seconds", True),
    ],
)
def test_parses(value, fmt, ok):
    assert table_checks.parses(value, fmt) is ok


def test_a_changed_date_format_blocks():
    iso = pd.DataFrame({"sold": [f"2021-01-{d:02d}" for d in range(1, 29)]})
    assert not table_checks.date_format_findings(_stats(iso), {"sold": "iso"}, "span 1")
    dmy = pd.DataFrame({"sold": [f"{d:02d}/01/2021" for d in range(1, 29)]})
    (finding,) = table_checks.date_format_findings(_stats(dmy), {"sold": "iso"}, "span 2")
    assert finding.anomaly == table_checks.DATE_FORMAT_CHANGED and finding.severity == BLOCK
    assert finding.feature == "sold" and "changed" in finding.line()


def test_an_id_constant_at_serving_is_a_warning():
    training = _stats(pd.DataFrame({"name": [f"car {i}" for i in range(40)], "c": ["a"] * 40}))
    constant = _stats(pd.DataFrame({"name": ["unknown"] * 5, "c": ["a"] * 5}))
    (finding,) = table_checks.constant_id_findings(training, constant, "serving")
    assert finding.feature == "name" and finding.severity == WARN
    varied = _stats(pd.DataFrame({"name": [f"car {i}" for i in range(5)], "c": ["a"] * 5}))
    assert not table_checks.constant_id_findings(training, varied, "serving")


def test_settings_carry_the_date_formats():
    settings = ValidationSettings(date_formats={"sold": "iso"}).with_warn_only(["drift"])
    again = ValidationSettings.from_json(settings.to_json())
    assert again.date_formats == {"sold": "iso"} and again.warn_only == ("drift",)
