"""The local run: LocalDagRunner with progress, log, summary, and its guards (locations, run lock)."""
