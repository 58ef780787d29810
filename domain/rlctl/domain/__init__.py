"""rlctl domain layer."""
