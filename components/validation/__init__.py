"""The validation gate: its checks (schema, drift, skew) and its HTML report."""
