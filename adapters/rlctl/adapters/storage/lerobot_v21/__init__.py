"""LeRobot v2.1 datasets on disk, read so that they can be converted to v3.0."""
