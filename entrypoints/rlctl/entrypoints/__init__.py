"""rlctl entrypoints layer."""
