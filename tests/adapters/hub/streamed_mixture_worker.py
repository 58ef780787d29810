"""One rank of the streamed-mixture test under torchrun (gloo): read this rank's share of a
streamed mixture through a DataLoader of two workers, then `rlctl train` on it in the same
process group.

`python -m torch.distributed.run --standalone --nproc_per_node=2 streamed_mixture_worker.py SPEC`,
SPEC a JSON object: repos (the mixture's repo ids), out (a folder), train (the `rlctl train`
arguments). Writes OUT/rank<r>.json: the (dataset_index, index) of every frame this rank read
in epochs 0 and 1, and the train command's exit code. The Hub is the one HF_ENDPOINT names.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist
from torch.utils.data import DataLoader

from rlctl.adapters.storage.streaming.mixture import StreamingMixture


def main() -> None:
    spec = json.loads(sys.argv[1])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mixture = StreamingMixture(spec["repos"], buffer_size=8, seed=5)  # rank from the group
    frames = {}
    for epoch in (0, 1):
        mixture.set_epoch(epoch)
        loader = DataLoader(mixture, batch_size=None, num_workers=2)
        frames[epoch] = [(int(i["dataset_index"]), int(i["index"])) for i in loader]
    dist.barrier()

    from rlctl.entrypoints.cli.main import cli

    try:
        cli.main(spec["train"], standalone_mode=False)
        code = 0
    except SystemExit as stop:
        code = int(stop.code or 0)
    out = Path(spec["out"])
    report = {"rank": mixture.rank, "world": mixture.world_size, "frames": frames, "code": code}
    (out / f"rank{rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
