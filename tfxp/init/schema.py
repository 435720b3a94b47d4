"""`tfxp init`, step 2: the curated schema, TFDV-inferred from the data's statistics,
with int domains and TRAINING / SERVING environments."""

from __future__ import annotations

from tfxp.init.profile import Inferred


def _drop_string_domain(schema, feature) -> None:
    """No list of allowed values: inline, or the schema-level domain the feature names."""
    if feature.HasField("string_domain"):
        feature.ClearField("string_domain")
    elif feature.HasField("domain"):
        kept = [d for d in schema.string_domain if d.name != feature.domain]
        feature.ClearField("domain")
        del schema.string_domain[:]
        schema.string_domain.extend(kept)


def infer_schema(inferred: Inferred, arrays: dict):
    """TFDV's schema from the data's statistics, with int domains and environments."""
    import pyarrow as pa
    from tensorflow_data_validation.api import validation_api
    from tensorflow_data_validation.statistics import stats_impl, stats_options

    from components.validation.serving_data import as_lists

    batch = pa.RecordBatch.from_arrays(
        [as_lists(arrays[c.name], c.kind) for c in inferred.columns],
        [c.name for c in inferred.columns],
    )
    stats = stats_impl.generate_statistics_in_memory(batch, stats_options.StatsOptions())
    schema = validation_api.infer_schema(stats, infer_feature_shape=True)
    by_name = {c.name: c for c in inferred.columns}
    import pyarrow.compute as pc

    for feature in schema.feature:
        col = by_name[feature.name]
        if col.missing:
            # A blank cell is an empty value list (as CsvExampleGen writes it): allow zero values.
            feature.ClearField("shape")
            feature.value_count.Clear()
            feature.value_count.max = 1
            feature.presence.min_fraction = 1.0
        if col.kind == "INT" and col.treatment in ("vocabulary", "label"):
            values = arrays[col.name]
            feature.int_domain.min = pc.min(values).as_py()
            feature.int_domain.max = pc.max(values).as_py()
            feature.int_domain.is_categorical = True
        if col.treatment in ("excluded", "date", "timestamp", "text"):
            _drop_string_domain(schema, feature)  # ids, dates, free text: new values expected
        if col is inferred.label:
            feature.not_in_environment.append("SERVING")
    schema.default_environment.extend(["TRAINING", "SERVING"])
    return schema
