"""Ports: the Protocols the use cases drive, one module per concern."""
