"""The Evaluator's fast path: TFMA's metrics without per-example Python.

`executor.Executor` is the Evaluator's executor (pipeline/definition.py). For an eval
config it covers (`executor.fast_path_refusal`) it scores the eval split through each
model's signatures in large batches (`scoring`), gives each batch's examples TFMA's
slice keys (`slices`), adds each slice's rows of the batch to that slice's accumulators
of TFMA's metric combiners (`accumulators`) and drops the batch; then it runs TFMA's own
extract, derived-metric, diff, validation and writer code on the accumulators (`metrics`).
Memory holds one batch and the accumulators, not the split. For any other config it runs
TFX's Evaluator executor unchanged.
"""
