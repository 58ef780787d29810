"""Torch policies (ACT, Diffusion Policy, MLP) and LeRobot-compatible checkpoints.

Importing this package imports nothing heavy; torch comes with the modules that need it.
"""
