"""Numeric features sliced by bucket: the bucket feature's name and each bucket's label.

Shared by the slicing rules and extractors (components/evaluation/slicing/rules.py,
components/evaluation/extractors.py), which add the bucket feature for TFMA, and by the
Evaluator's fast path (components/evaluation/fast/slices.py), which computes the same
labels from whole columns.
"""

from __future__ import annotations

import math

BUCKET_SUFFIX = "_bucket"


def bucket_feature(name: str) -> str:
    """The slice feature holding a numeric feature's bucket."""
    return f"{name}{BUCKET_SUFFIX}"


def _number(value: float) -> str:
    return f"{value:g}"


def bucket_label(value: float | None, bounds: tuple[float, ...] | list[float]) -> str:
    """The bucket of `value` among ascending `bounds`: "<1", "1-3", ">=10" (or "missing").

    Labels sort the way a reader expects when shown in bucket order, and say
    the range without a lookup table.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "missing"
    if value < bounds[0]:
        return f"<{_number(bounds[0])}"
    for low, high in zip(bounds, bounds[1:], strict=False):
        if low <= value < high:
            return f"{_number(low)}-{_number(high)}"
    return f">={_number(bounds[-1])}"
