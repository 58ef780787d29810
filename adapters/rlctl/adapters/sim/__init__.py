"""Simulators through gymnasium: env configs, lazy vector envs, and the `Simulation` port.

Importing the package installs the hook that reads third-party env types (entry-point group
`rlctl.envs`) before an env config is structured; gymnasium itself is imported only when envs
are built.
"""

from rlctl.adapters.sim import registry as _registry  # noqa: F401  (installs the hook)
