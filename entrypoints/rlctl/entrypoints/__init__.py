"""rlctl entrypoints layer: the CLI, the container, `rlctl.api`.

Importing it prepares the process for torch (`process_setup`): every command and every embedder
comes through here before any adapter loads torch."""

from rlctl.entrypoints.process_setup import prepare_process_environment

prepare_process_environment()
