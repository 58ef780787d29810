"""Acting: turning the chunks a policy predicts into one action per control tick, once for every
policy — a trained one running here, a scripted or random one, one served by `rlctl policy
serve` — and every caller (eval, record, `rlctl.api`).

- `queues`: where chunks wait (`ActionQueue`, real-time chunking's `RealTimeChunks` and the
  `Leftover` the next chunk follows, the `ActionBuffer` protocol ACT's temporal ensemble meets).
- `history`: the last `n_obs_steps` observations a policy with a history reads.
- `chunked`: `ChunkedActing`, the loop of a policy that waits for its chunks: history, buffer,
  and whether a tick reads its observation at all.
- `timed`: the queue of a robot whose chunks arrive from a server while it acts
  (`TimedActionQueue`, LeRobot's aggregations) and the inference delay it measures.
- `described`: the `Policy` members a config answers (`ConfigDescribed`).

Numpy and the domain only: torch tensors are handled through the operations both share
(`rlctl.domain.processors.arrays`), so the fakes and the remote client import no torch.
"""

from rlctl.domain.acting.chunked import ChunkedActing
from rlctl.domain.acting.described import ConfigDescribed
from rlctl.domain.acting.history import ObservationHistory
from rlctl.domain.acting.queues import (
    ActionBuffer,
    ActionQueue,
    ActionQueueEmpty,
    Leftover,
    RealTimeChunks,
)
from rlctl.domain.acting.timed import (
    AGGREGATIONS,
    Aggregate,
    InferenceDelay,
    TimedActionQueue,
    aggregation,
)

__all__ = [
    "AGGREGATIONS",
    "ActionBuffer",
    "ActionQueue",
    "ActionQueueEmpty",
    "Aggregate",
    "ChunkedActing",
    "ConfigDescribed",
    "InferenceDelay",
    "Leftover",
    "ObservationHistory",
    "RealTimeChunks",
    "TimedActionQueue",
    "aggregation",
]
