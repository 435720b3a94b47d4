"""Datasets as versions: spans published atomically, their versions, DVC."""
