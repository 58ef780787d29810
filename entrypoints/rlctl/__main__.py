"""`python -m rlctl ...`, as torchrun launches it (`torchrun --nproc-per-node=N -m rlctl train
...`): the `rlctl` command."""

from rlctl.entrypoints.cli.main import main

if __name__ == "__main__":
    main()
