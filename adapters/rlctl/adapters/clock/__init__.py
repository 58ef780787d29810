"""Clocks for control loops: the system clock with a precise sleep."""
