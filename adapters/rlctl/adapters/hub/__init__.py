"""The Hugging Face Hub through huggingface_hub: push, pull, and a cache shared with LeRobot.

huggingface_hub is an optional dependency (`rlctl-adapters[hub]`); without it, using the Hub
is one clear error instead of an import traceback.
"""

from importlib.util import find_spec

from rlctl.domain.errors import NotSupported

if find_spec("huggingface_hub") is None:  # pragma: no cover - the test environment has it
    raise NotSupported(
        "the Hugging Face Hub needs the huggingface_hub package, which is not installed",
        where="rlctl.adapters.hub",
        hint="pip install 'rlctl-adapters[hub]' (or 'huggingface_hub>=2.4')",
    )
