"""Batches of a numbers-only dataset held in memory (quickstart's and other state-only runs).

Such a dataset's rows are already in memory once it is open, so a step's batch needs no
DataLoader, no item and no file: the columns become torch tensors once, each windowed key is
expanded to its windows once (the reader's rows and padding for every position), and since the
sampler's order is known an epoch ahead, the samples of about an epoch's steps are gathered at
once, one index op per column, and cut into the steps' batches at once; a step takes the next.
The batches are those the loader gathers from the reader (`reader.gather`) or collates item by
item, key for key and bit for bit.

Normalising once: when every pre-processing step before the policy's normaliser leaves the
values alone (renames nothing, adds a batch axis, keeps them on the CPU uncast), the normaliser
— an elementwise map with fixed statistics — runs once on the columns, and each step runs the
pre-processor without it. The same float operations on the same values give the same bits, on
a column or on rows gathered from it. A run normalising on a GPU keeps doing it per batch there
(a few kernels; not verified bit for bit against the CPU's).

An edit in place swaps another folder in at the dataset's path: the reader notices it by the
folder's identity. The rows in memory stay the opened dataset's, so it is checked once per epoch
instead of once per batch; the run still stops with `DatasetChanged` within an epoch.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import torch

from rlctl.adapters.policies.processors import DeviceStep
from rlctl.adapters.storage.lerobot_v3.reader import NumericColumns
from rlctl.adapters.storage.torch_dataset import LeRobotTorchDataset
from rlctl.adapters.training.sampling import StepBatchSampler
from rlctl.domain.processors.pipeline import ProcessorPipeline, from_transition, to_transition
from rlctl.domain.processors.step import ProcessorStep
from rlctl.domain.processors.steps.normalize import ACTION_KEY as ACTION
from rlctl.domain.processors.steps.normalize import Normalizer
from rlctl.domain.processors.steps.rename import RenameObservations
from rlctl.domain.processors.steps.to_batch import STATE_KEYS, AddBatchDimension
from rlctl.domain.windows import is_pad_key

# The most bytes a run's in-memory batches may hold (the columns with their windows, twice: as
# read and in an epoch's order); a dataset needing more is gathered batch by batch by the loader.
MEMORY_BUDGET_BYTES = 2 << 30


class ColumnBatches(Iterator[dict[str, Any]]):
    """The sampler's batches, from step `sampler.start_step` on, gathered from `source`.

    This rank's samples of about an epoch's steps are gathered at once, in the sampler's order
    (across an epoch's end too), with one index op per column (windowed keys were expanded to
    their windows up front), and cut into the steps' batches; a step then only takes the next
    one (a step's Python work was the data wait of small models' training: a slice per column).
    `normalized` replaces some columns by their normalised values (`normalize_columns`);
    `check_unchanged` raises when the dataset folder was replaced, called once per block.
    """

    def __init__(
        self,
        source: NumericColumns,
        sampler: StepBatchSampler,
        *,
        check_unchanged: Callable[[], None],
        normalized: Mapping[str, torch.Tensor] | None = None,
    ) -> None:
        replaced = dict(normalized or {})
        columns: dict[str, torch.Tensor] = {}
        for key, values in source.columns.items():
            column = replaced[key] if key in replaced else _tensor(values)
            window = source.windows.get(key)
            columns[key] = column if window is None else column[torch.from_numpy(window[0])]
        for key, (_, pad) in source.windows.items():
            columns[is_pad_key(key)] = _tensor(pad)
        # Keys in an item's order, as the loader's batches have them.
        self._columns = columns
        self._task_index = source.task_index
        self._tasks = source.tasks
        self._sampler = sampler
        self._check_unchanged = check_unchanged
        self._step = sampler.start_step
        self._ready: deque[dict[str, Any]] = deque()

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Each tensor's shape in a batch, the batch axis left out."""
        return {key: tuple(value.shape[1:]) for key, value in self._columns.items()}

    def __iter__(self) -> ColumnBatches:
        return self

    def __next__(self) -> dict[str, Any]:
        if not self._ready:
            self._ready = self._block(self._step)
        self._step += 1
        return self._ready.popleft()

    def _block(self, first: int) -> deque[dict[str, Any]]:
        """The batches of about an epoch's steps from step `first` on: this rank's samples of
        all of them gathered with one index op per column, then cut into the steps' batches
        (views) at once, so that a step only takes the next one."""
        self._check_unchanged()
        sampler = self._sampler
        size, batch, world = len(sampler.positions), sampler.batch_size, sampler.world_size
        steps = max(1, size // (batch * world))
        starts = ((first + np.arange(steps)) * world + sampler.rank) * batch
        stream = (starts[:, None] + np.arange(batch)).reshape(-1)
        epochs, offsets = np.divmod(stream, size)
        frames = np.empty_like(stream)
        for epoch in np.unique(epochs).tolist():
            where = epochs == epoch
            frames[where] = sampler.epoch_frames(epoch)[offsets[where]]
        index = torch.from_numpy(frames)
        keys = list(self._columns)
        parts = [
            value.index_select(0, index).view(steps, batch, *value.shape[1:]).unbind(0)
            for value in self._columns.values()
        ]
        tasks = [self._tasks[t] for t in self._task_index[frames].tolist()]
        per_step = zip(*parts, strict=True) if parts else [()] * steps
        return deque(
            {**dict(zip(keys, values, strict=True)), "task": tasks[i * batch : (i + 1) * batch]}
            for i, values in enumerate(per_step)
        )


def _tensor(values: np.ndarray) -> torch.Tensor:
    # The reader's columns may be read-only views of Arrow buffers: torch gets its own copy.
    return torch.from_numpy(values if values.flags.writeable else values.copy())


def column_batches(
    dataset: Any, sampler: StepBatchSampler, preprocessor: ProcessorPipeline
) -> tuple[ColumnBatches, ProcessorPipeline] | None:
    """The batches of `dataset` gathered from memory, with the pre-processing each still needs;
    None when the dataset is not one of numbers only (or its windows would take too much
    memory): its batches then come from the loader."""
    if not isinstance(dataset, LeRobotTorchDataset) or not dataset.gathers:
        return None
    reader = dataset.reader
    source = reader.numeric_columns()
    if 2 * _bytes(source) > MEMORY_BUDGET_BYTES:
        return None
    normalizer, rest = split_normalizer(preprocessor)
    normalized = {}
    if normalizer is not None:
        normalized = normalize_columns(source.columns, normalizer)
    batches = ColumnBatches(
        source, sampler, check_unchanged=reader.check_unchanged, normalized=normalized
    )
    return batches, without_idle_steps(rest, batches.shapes)


def _bytes(source: NumericColumns) -> int:
    """What the columns take once each windowed key is expanded to its windows."""
    total = 0
    for key, values in source.columns.items():
        window = source.windows.get(key)
        total += values.nbytes * (1 if window is None else window[0].shape[1])
    return total + sum(pad.nbytes for _, pad in source.windows.values())


def keeps_values(step: ProcessorStep) -> bool:
    """Whether `step` leaves every numeric value as it is, on the CPU (keys and shapes aside)."""
    if isinstance(step, RenameObservations):
        return not step.config.rename_map
    if isinstance(step, AddBatchDimension):
        return True
    if isinstance(step, DeviceStep):
        return step.device.type == "cpu" and step.float_dtype is None
    return False


def without_idle_steps(
    pipeline: ProcessorPipeline, shapes: Mapping[str, tuple[int, ...]]
) -> ProcessorPipeline:
    """`pipeline` without the steps that leave batches of these shapes (CPU tensors, a list of
    tasks) as they are: a rename of nothing, a move to the CPU without a cast, a batch axis
    added to no value (`AddBatchDimension` adds one to a 1-D state or action only)."""

    def idle(step: ProcessorStep) -> bool:
        if isinstance(step, RenameObservations):
            return not step.config.rename_map
        if isinstance(step, DeviceStep):
            return step.device.type == "cpu" and step.float_dtype is None
        if isinstance(step, AddBatchDimension):
            # A batch of one number per sample is 1-D: the step would make it (1, batch).
            return all(shapes[key] != () for key in (*STATE_KEYS, ACTION) if key in shapes)
        return False

    return ProcessorPipeline([s for s in pipeline.steps if not idle(s)], name=pipeline.name)


def split_normalizer(pipeline: ProcessorPipeline) -> tuple[Normalizer | None, ProcessorPipeline]:
    """The normaliser that may run once on the columns, and the pipeline each batch still needs
    (`pipeline` without it); (None, `pipeline`) when a step before it may change the values."""
    steps = pipeline.steps
    for index, step in enumerate(steps):
        if type(step) is Normalizer:
            rest = ProcessorPipeline([*steps[:index], *steps[index + 1 :]], name=pipeline.name)
            return step, rest
        if not keeps_values(step):
            break
    return None, pipeline


def normalize_columns(
    columns: Mapping[str, np.ndarray], normalizer: Normalizer
) -> dict[str, torch.Tensor]:
    """The columns `normalizer` changes, normalised as a batch of them would be."""
    given = {key: _tensor(column) for key, column in columns.items()}
    out = from_transition(normalizer(to_transition(given)))
    return {key: out[key] for key in given if key in out and out[key] is not given[key]}
