"""Dataset tools on LeRobot v3.0 folders: check, rebuild (merge, split, delete), statistics."""
