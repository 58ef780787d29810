"""Logs, progress bars and metrics sinks."""
