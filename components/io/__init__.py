"""Shared reading and writing: CSV text, object storage, content fingerprints, native stderr to the log."""
