"""A toy robot plugin for rlctl: config classes in `config`, the adapters in `robot`."""
