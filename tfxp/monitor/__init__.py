"""Watching what runs: the watcher, alerts, serving skew and traffic."""
