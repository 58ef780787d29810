"""π0.5: π0 with the state in the prompt and the time in the action expert's norms.

    prefix:  images (SigLIP) + "Task: ..., State: <256 bins>;\\nAction: " tokens
    suffix:  action_in_proj(x_t), one token per action               -> the action expert,
             every norm modulated by time_mlp(sincos(t)) (adaptive RMSNorm: scale, shift, gate)
    output:  action_out_proj(expert's tokens)                        = velocity of the flow

The state reaches the model only through the prompt, written by the pre-processor after the
normaliser (`tokenizer.Pi05StatePrompt`); so the suffix has no state token and the model no
`state_proj`. Everything else (the PaliGemma, flow matching, the sampler, loading) is π0's.
Parameter names are LeRobot 0.6.1's (`model.time_mlp_in`, `...input_layernorm.dense`, ...).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.adapters.policies.base import Batch
from rlctl.adapters.policies.vla.pi0 import PI0FlowMatching, PiPolicy, tokens_after_normalizer
from rlctl.adapters.policies.vla.tokenizer import Pi05PromptConfig, Pi05StatePrompt
from rlctl.domain.policies.pi0 import PiConfig
from rlctl.domain.policies.pi05 import PI05Config
from rlctl.domain.processors import ProcessorStep


class PI05FlowMatching(PI0FlowMatching):
    """LeRobot's `PI05Pytorch`."""

    adaptive_expert = True

    def _time_layers(self, width: int) -> None:
        self.time_mlp_in = nn.Linear(width, width)
        self.time_mlp_out = nn.Linear(width, width)

    def _time_mlp(self, time_embeds: Tensor) -> Tensor:
        return F.silu(self.time_mlp_out(F.silu(self.time_mlp_in(time_embeds))))

    def embed_suffix(
        self, state: Tensor | None, x_t: Tensor, time: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """One token per action; the time becomes the condition of the expert's norms."""
        actions = self._checkpointed(self.action_in_proj, x_t)
        cond = self._checkpointed(self._time_mlp, self._time(time))
        return actions, *self._suffix_masks(actions), cond

    def prepare_times(self, times: list[Tensor]) -> list[tuple[Tensor, list[Tensor]]]:
        """The expert's norm modulations at every step's time, from one pass over their weights
        (`expert_modulations`) instead of one per step."""
        batch = times[0].shape[0]
        cond = self._time_mlp(self._time(torch.cat(times)))
        tables = self.paligemma_with_expert.expert_modulations(cond)
        return [
            (time, [table[i * batch : (i + 1) * batch] for table in tables])
            for i, time in enumerate(times)
        ]

    def suffix_blocks(self) -> list[bool]:
        """One block of actions, seeing each other (the prefix sees none of them)."""
        return [True] + [False] * (self.config.chunk_size - 1)


class PI05Policy(PiPolicy):
    """π0.5 on normalised batches whose prompt already holds the state."""

    config_class = PI05Config
    flow_matching = PI05FlowMatching

    @classmethod
    def preprocessor_steps(cls, config: PI05Config) -> list[ProcessorStep]:
        return [Pi05StatePrompt(Pi05PromptConfig(max_state_dim=config.max_state_dim))]

    @classmethod
    def arrange_processors(
        cls, config: PiConfig, pre: list[ProcessorStep], post: list[ProcessorStep]
    ) -> tuple[list[ProcessorStep], list[ProcessorStep]]:
        """LeRobot's π0.5 order: rename, batch, relative, normalise, state prompt, tokenizer,
        device (the state is discretised once normalised into [-1, 1])."""
        pre, post = super().arrange_processors(config, pre, post)
        return tokens_after_normalizer(pre, Pi05StatePrompt, [cls.tokenizer_step(config)]), post

    def state(self, batch: Batch) -> Tensor | None:
        return None
