"""Fast executors for stock TFX components (StatisticsGen, Transform) that have no room of their own here.

The Evaluator's fast path lives with the sliced Evaluator it serves (components/evaluation/fast/).
"""
