"""Evaluation by slice: bucketed slice features, per-slice blessing rules, the Evaluator that applies them."""
