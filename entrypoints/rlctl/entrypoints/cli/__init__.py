"""The `rlctl` command line."""
