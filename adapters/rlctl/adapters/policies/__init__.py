"""Torch policies and LeRobot-compatible checkpoints.

ACT, Diffusion Policy and the MLP are one module each here, beside what every policy shares (the
model base and registry, checkpoints, processors, acting on chunks, the CPU training kernels).
The vision-language-action family (SmolVLA, π0, π0.5) has its own package, `vla/`, holding what
its members share once: backbones, flow matching with real-time chunking, masks, loading.

Importing this package imports nothing heavy; torch comes with the modules that need it.
"""
