"""Transform's fast path: TFX's analysis, then the transformed examples written in this process (executor.py)."""
