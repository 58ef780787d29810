"""DeleteEpisodes: a dataset without some of its episodes, the rest renumbered from 0.

With an output folder, the source is left as it is. Without one the dataset is edited in place,
safely: the new dataset is built beside it and swapped in when complete, so until then (and
after any failure) the original stays whole and readable. Episode numbers name episodes of the
dataset as it is: the same deletion asked again of the dataset it produced (a blind retry) is
refused unless `force`.
"""

from __future__ import annotations

from collections.abc import Sequence

from rlctl.application.episode_spec import format_episode_spec, parse_episode_spec
from rlctl.application.ports.dataset_tools import EpisodeRef
from rlctl.application.use_cases.dataset_rebuild import (
    DatasetTool,
    EditRequest,
    EditResult,
    build,
    build_in_place,
    require_new_output,
)
from rlctl.domain.errors import InvalidInput


class DeleteEpisodes(DatasetTool):
    def __call__(
        self,
        location: str,
        episodes: str | Sequence[int],
        output: str | None = None,
        *,
        force: bool = False,
    ) -> EditResult:
        if output is None:
            # From reading the episodes to the swap: a recording appending meanwhile would lose
            # its episodes when the rebuilt folder replaces the one it wrote to.
            with self._folders.lock(location):
                return self._delete(location, episodes, output, force)
        return self._delete(location, episodes, output, force)

    def _delete(
        self, location: str, episodes: str | Sequence[int], output: str | None, force: bool
    ) -> EditResult:
        meta = self._meta_reader.read_meta(location)
        doomed = set(parse_episode_spec(episodes, meta.total_episodes))
        kept = [i for i in range(meta.total_episodes) if i not in doomed]
        if not kept:
            raise InvalidInput(
                f"episodes {format_episode_spec(doomed)} are all the dataset has",
                where="--episodes",
                hint="a dataset keeps at least one episode; remove the folder instead",
            )
        refs = [EpisodeRef(location, i) for i in kept]
        if output is None:
            return build_in_place(
                self._rebuilder,
                self._folders,
                self._progress,
                location=location,
                template=meta,
                refs=refs,
                description="rewriting without the deleted episodes",
                request=EditRequest.of("delete-episodes", meta, force, episodes=sorted(doomed)),
            )
        require_new_output(self._folders, output, [location])
        return build(self._rebuilder, self._progress, output=output, template=meta, refs=refs)
