"""LeRobot v3.0 datasets streamed from the Hub: `meta/` fetched, tables and videos by ranges."""
