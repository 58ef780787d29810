"""In-memory and scripted adapters for every port: real, shipped, used by tests and dry runs."""
