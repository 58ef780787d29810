"""Remote inference: the gRPC policy server, its client, and the robot's `RemotePolicy`."""
