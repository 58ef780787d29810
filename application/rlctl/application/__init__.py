"""rlctl application layer."""
