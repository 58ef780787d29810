"""Imported once by the worker forkserver (`LiberoEnv.worker_preload`): LIBERO and robosuite.

Every worker of every task is then forked with them imported, instead of importing them itself
(seconds each). Importing them creates no GL context (robosuite makes one per simulator, on the
first reset) and no thread. A failure here is left for the worker's first reset to report with
its proper message: the forkserver must not die of it.
"""

from __future__ import annotations

import contextlib

from rlctl.adapters.sim.envs.libero_setup import import_libero_envs

with contextlib.suppress(Exception):
    import_libero_envs()
