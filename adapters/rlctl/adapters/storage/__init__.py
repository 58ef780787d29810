"""Dataset storage adapters: LeRobot v3.0 on disk, and a torch Dataset over it."""
