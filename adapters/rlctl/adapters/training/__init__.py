"""Training with torch: the backend behind `TrainPolicy` (data, optimiser, checkpoints, DDP).

Importing this package imports nothing heavy; torch comes with the modules that need it.
"""
