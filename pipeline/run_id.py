"""A run's id: sortable by time, unique across concurrent starts (local runs, batch inference)."""

from __future__ import annotations

import datetime as dt
import uuid


def new_run_id() -> str:
    return dt.datetime.now().strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
