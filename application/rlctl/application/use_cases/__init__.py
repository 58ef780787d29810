"""Use cases: one class per piece of work, ports in the constructor, one public method."""
