"""The Evaluator's fast path: TFMA's metrics without per-example Python.

`executor.Executor` is the Evaluator's executor (pipeline/definition.py). For an eval
config it covers (`executor.fast_path_refusal`) it scores the eval split through each
model's signatures in large batches (`scoring`), gives each example TFMA's slice keys
(`slices`), fills TFMA's metric combiners of each slice from whole columns and runs TFMA's own derived-metric, diff, validation and writer code on
them (`metrics`); for any other config it runs TFX's Evaluator executor unchanged.
"""
