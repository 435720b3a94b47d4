"""What changed between two runs: their facts (data, schema, code, ...) compared, pure."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Change:
    section: str
    key: str
    a: Any
    b: Any


SECTIONS = ("data", "schema", "code", "hyperparameters", "metrics", "model")


def diff_facts(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> list[Change]:
    """Every (section, key) whose value differs, in section order then key order."""
    changes = []
    sections = [s for s in SECTIONS if s in a or s in b]
    sections += sorted((set(a) | set(b)) - set(SECTIONS))
    for section in sections:
        sa, sb = a.get(section, {}), b.get(section, {})
        for key in sorted(set(sa) | set(sb)):
            va, vb = sa.get(key), sb.get(key)
            if isinstance(va, float) and isinstance(vb, float) and math.isclose(va, vb):
                continue
            if va != vb:
                changes.append(Change(section, key, va, vb))
    return changes


def diff_report(
    run_a: str, run_b: str, a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    changes = diff_facts(a, b)
    changed = {c.section for c in changes}
    return {
        "a": run_a,
        "b": run_b,
        "changed": {
            s: {c.key: {"a": c.a, "b": c.b} for c in changes if c.section == s}
            for s in SECTIONS
            if s in changed
        },
        "unchanged": [s for s in SECTIONS if s not in changed],
        "facts": {"a": a, "b": b},
    }
