"""Imports the curated schema, keyed by its content.

TFX's ImportSchemaGen caches on the file *path*, so an edited schema.pbtxt
would be served from cache. This component takes the file's SHA-256 as a
parameter: an edit changes the parameter and therefore the cache key, and the
executor refuses a file that changed after the pipeline was built.
"""

import hashlib
import os

from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.dsl.component.experimental.annotations import OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.io import fileio
from tfx.types import standard_artifacts

SCHEMA_FILE_NAME = "schema.pbtxt"


def file_sha256(path: str) -> str:
    with fileio.open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def load_schema(path: str) -> schema_pb2.Schema:
    """Parses a text schema, with an error that names the file."""
    with fileio.open(path, "r") as f:
        text = f.read()
    try:
        return text_format.Parse(text, schema_pb2.Schema())
    except text_format.ParseError as e:
        raise ValueError(f"{path}: not a valid schema.pbtxt: {e}") from e


def schema_column_types(schema: schema_pb2.Schema) -> dict:
    """Feature name -> type name (INT, FLOAT, BYTES), as the CSV checks expect."""
    return {feat.name: schema_pb2.FeatureType.Name(feat.type) for feat in schema.feature}


def sequence_column_types(schema: schema_pb2.Schema) -> dict:
    """Like schema_column_types, with a SequenceExample schema's feature lists (the
    children of its STRUCT feature) beside its context features."""
    types = {}
    for feat in schema.feature:
        if feat.type == schema_pb2.STRUCT:
            types.update(schema_column_types(feat.struct_domain))
        else:
            types[feat.name] = schema_pb2.FeatureType.Name(feat.type)
    return types


def schema_nan_free_columns(schema: schema_pb2.Schema) -> list[str]:
    """FLOAT features whose schema refuses NaN (float_domain { disallow_nan: true })."""
    return sorted(
        f.name
        for f in schema.feature
        if f.type == schema_pb2.FLOAT and f.HasField("float_domain") and f.float_domain.disallow_nan
    )


@component
def CuratedSchemaImporter(  # TFX component naming
    schema_file: Parameter[str],
    content_sha256: Parameter[str],
    schema: OutputArtifact[standard_artifacts.Schema],
) -> None:
    actual = file_sha256(schema_file)
    if actual != content_sha256:
        raise ValueError(
            f"{schema_file} changed after the pipeline was built "
            f"(sha256 {actual[:12]} != {content_sha256[:12]}); rebuild the pipeline and rerun."
        )
    parsed = load_schema(schema_file)
    # KFP's launcher creates only the parent of an output artifact's folder
    # (LocalDagRunner creates the folder itself): on a local or mounted
    # pipeline root the folder may not exist yet.
    fileio.makedirs(schema.uri)
    with fileio.open(os.path.join(schema.uri, SCHEMA_FILE_NAME), "w") as f:
        f.write(text_format.MessageToString(parsed))
