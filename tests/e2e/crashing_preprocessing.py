"""A preprocessing_fn that crashes, for test_failed_execution.py (importable: tests/e2e is on sys.path)."""


def preprocessing_fn(inputs):
    raise RuntimeError("preprocessing exploded on purpose")
