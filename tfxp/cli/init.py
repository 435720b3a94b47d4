"""`tfxp init`: a dataset from CSV files, no code (the work is in `tfxp/dataset_init.py`)."""

from tfxp.dataset_init import register

__all__ = ["register"]
