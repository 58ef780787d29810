"""Regenerate `adapters/rlctl/adapters/robots/reachy2_api/` from Pollen's `reachy2_sdk_api`.

    uv run python tools/gen_reachy2_api.py [--version 1.0.21]

`reachy2_sdk_api` pins grpcio and protobuf below what rlctl uses, so it is installed into a scratch
virtual environment (with uv), where its modules' descriptors are dumped into a FileDescriptorSet,
each file moved under `rlctl/adapters/robots/reachy2_api/` (the messages' and services' full names,
what goes on the wire, are unchanged). This project's grpcio-tools then generates the modules
rlctl imports: the SDK's and video services and what they import.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "rlctl/adapters/robots/reachy2_api/"
TARGET = REPO / "adapters" / PACKAGE
WANTED = ("reachy.proto", "video.proto", "mobile_base_mobility.proto")

DUMP = f"""
import importlib, pkgutil, sys
import reachy2_sdk_api
from google.protobuf import descriptor_pb2, empty_pb2, timestamp_pb2, wrappers_pb2, any_pb2
modules = pkgutil.iter_modules(reachy2_sdk_api.__path__)
names = sorted(m.name for m in modules if m.name.endswith("_pb2"))
files = []
for name in names:
    proto = descriptor_pb2.FileDescriptorProto()
    importlib.import_module(name).DESCRIPTOR.CopyToProto(proto)
    files.append(proto)
own = {{p.name for p in files}}
out = descriptor_pb2.FileDescriptorSet()
for module in (any_pb2, timestamp_pb2, wrappers_pb2, empty_pb2):
    proto = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(proto)
    out.file.append(proto)
for proto in files:
    proto.name = {PACKAGE!r} + proto.name
    deps = [{PACKAGE!r} + d if d in own else d for d in proto.dependency]
    del proto.dependency[:]
    proto.dependency.extend(deps)
    out.file.append(proto)
open(sys.argv[1], "wb").write(out.SerializeToString())
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="1.0.21", help="reachy2_sdk_api's version")
    args = parser.parse_args()
    from google.protobuf import descriptor_pb2

    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run(["uv", "venv", "-q", "-p", "3.12", str(venv)], check=True)
        python = venv / "bin" / "python"
        subprocess.run(
            [
                "uv",
                "pip",
                "install",
                "-q",
                "--python",
                str(python),
                f"reachy2_sdk_api=={args.version}",
            ],
            check=True,
        )
        descriptors = Path(tmp) / "reachy2.fds"
        subprocess.run([str(python), "-c", DUMP, str(descriptors)], check=True)
        files = descriptor_pb2.FileDescriptorSet.FromString(descriptors.read_bytes()).file
        by_name = {f.name: f for f in files}
        needed: list[str] = []

        def add(name: str) -> None:
            if name in needed or name.startswith("google/"):
                return
            for dependency in by_name[name].dependency:
                add(dependency)
            needed.append(name)

        for wanted in WANTED:
            add(PACKAGE + wanted)
        out = Path(tmp) / "out"
        out.mkdir()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                f"--descriptor_set_in={descriptors}",
                f"--python_out={out}",
                f"--pyi_out={out}",
                f"--grpc_python_out={out}",
                *needed,
            ],
            check=True,
        )
        for generated in sorted((out / PACKAGE).iterdir()):
            shutil.copy(generated, TARGET / generated.name)
            print("wrote", (TARGET / generated.name).relative_to(REPO))


if __name__ == "__main__":
    main()
