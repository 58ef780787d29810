"""Cold start of the CLI: wall time and peak memory of `rlctl --help` (goal < 0.5 s, < 100 MB).

Usage: uv run python benchmarks/cold_start.py [--repeat 5] [--lerobot /path/to/lerobot-train]
Prints one JSON line per command: median wall seconds and peak RSS in MB of the child process.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def measure(cmd: list[str], repeat: int) -> dict[str, float | str]:
    walls = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        walls.append(time.perf_counter() - start)
    # ru_maxrss of children is the largest child seen so far, in KiB on Linux.
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {
        "command": " ".join(cmd),
        "wall_s": round(statistics.median(walls), 3),
        "peak_rss_mb": round(peak_mb, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--lerobot", help="path of lerobot-train, to run its --help once")
    args = parser.parse_args()
    rlctl = shutil.which("rlctl") or str(Path(sys.executable).with_name("rlctl"))
    for sub in (["--help"], ["dataset", "info", "--help"]):
        print(json.dumps(measure([rlctl, *sub], args.repeat)))
    if args.lerobot:
        # A separate process tree per measurement keeps LeRobot's peak apart from ours.
        code = (
            "import json,resource,subprocess,sys,time;t=time.perf_counter();"
            "subprocess.run([sys.argv[1],'--help'],capture_output=True);"
            "print(json.dumps({'command':sys.argv[1]+' --help',"
            "'wall_s':round(time.perf_counter()-t,3),"
            "'peak_rss_mb':round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss/1024,1)}))"
        )
        subprocess.run([sys.executable, "-c", code, args.lerobot], check=True)


if __name__ == "__main__":
    main()
