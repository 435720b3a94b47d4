"""Beam on Apache Spark, in Python: a Beam runner that hands Beam's own fused stages to Spark.

A library: it imports Beam, pyspark and `compat/` only (an import contract says so),
so any Beam Python pipeline can name it as its runner.
"""
