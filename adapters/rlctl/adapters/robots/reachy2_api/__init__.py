"""Reachy 2's gRPC API (Pollen Robotics' `reachy2_sdk_api` 1.0.21, Apache-2.0), generated here.

Pollen's `reachy2_sdk` and `reachy2_sdk_api` pin grpcio<=1.73.1, protobuf<=6.32 and numpy<2.3,
which rlctl's environment (grpcio 1.85, protobuf 7, numpy 2.5) cannot take. The wire protocol is
the same whatever generated the stubs, so these modules are generated with this project's
grpcio-tools from the descriptors shipped in `reachy2_sdk_api` 1.0.21's wheel, the files moved
under this package (the services' and messages' full names, what goes on the wire, are
unchanged). `uv run python tools/gen_reachy2_api.py` regenerates them.
"""
