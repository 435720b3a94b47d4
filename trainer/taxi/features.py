"""Feature names and their treatment for the Chicago taxi data.

The label is "big tipper": the tip was more than 20% of the fare.
"""

from __future__ import annotations

LABEL_KEY = "tips"
FARE_KEY = "fare"
BIG_TIP_FRACTION = 0.2

# Continuous features: z-scored.
DENSE_FLOAT_FEATURE_KEYS = ["trip_miles", "fare", "trip_seconds"]

# Coordinates: bucketized into quantiles (their relation to the label is not
# monotone, so one-hot buckets beat a z-score here).
BUCKET_FEATURE_KEYS = [
    "pickup_latitude",
    "pickup_longitude",
    "dropoff_latitude",
    "dropoff_longitude",
]
FEATURE_BUCKET_COUNT = 10

# Strings and high-cardinality ids: vocabulary with out-of-vocabulary buckets.
VOCAB_FEATURE_KEYS = ["payment_type", "company"]
VOCAB_SIZE = 1000
OOV_SIZE = 10

# Small integer categories, used directly as one-hot indices. The value is the
# exclusive upper bound of the index (from the curated schema's int domains).
CATEGORICAL_FEATURE_MAX = {
    "trip_start_hour": 24,
    "trip_start_day": 8,
    "trip_start_month": 13,
    "pickup_community_area": 78,
    "dropoff_community_area": 78,
}


def transformed_name(key: str) -> str:
    return key + "_xf"


TRANSFORMED_LABEL_KEY = transformed_name(LABEL_KEY)
