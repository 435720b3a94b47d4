"""StatisticsGen's fast path: TFDV's statistics in one in-process pass, no Beam (executor.py)."""
