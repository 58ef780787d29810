"""A toy rlctl policy plugin (see config.py and model.py)."""
