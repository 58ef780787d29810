"""rlctl adapters layer."""
