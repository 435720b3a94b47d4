"""Batch inference: score a span's raw CSV rows with a pushed model, in the pipeline or by `tfxp infer`."""
