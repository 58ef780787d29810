"""LeRobot v3.0 datasets on disk: meta/, data/ parquet files and videos/ mp4 files."""
