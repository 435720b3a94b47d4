"""Evaluation: TFMA's extractors, slice buckets and rules, the sliced Evaluator and its fast path."""
