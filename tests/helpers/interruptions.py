"""A run stopped in this process by work done, never by time: at the n-th unit appended to the
shards (``ShardAssembler.append``, or with pieces kept ``PieceKeeper.append``), as Ctrl-C or a
bug would stop it there."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

from bert_data.run.assembly import ShardAssembler
from bert_data.run.kept_pieces import PieceKeeper


@contextmanager
def interrupted_at_append(number: int, *, after: bool = False, exception=KeyboardInterrupt,
                          pieces: Optional[list] = None) -> Iterator[List[int]]:
    """While inside, ``exception`` (Ctrl-C unless told) is raised at the ``number``-th call of
    ``ShardAssembler.append``: before that unit's segments are appended (``number - 1`` units in
    the shards, all journaled), or with ``after`` once they are (``number`` units in the shards,
    the last not yet journaled).  The names of the pieces each call is given go into ``pieces``.
    Yields the calls so far (1, 2, ...); the real ``append`` is back on leaving."""
    calls: List[int] = []

    def appending(real_append):
        def append(self, segments):
            calls.append(len(calls) + 1)
            if pieces is not None:
                pieces.extend(Path(segment.path).name for segment in segments)
            if not after and len(calls) == number:
                raise exception
            real_append(self, segments)
            if after and len(calls) == number:
                raise exception

        return append

    with pytest.MonkeyPatch.context() as patch:
        for kind in (ShardAssembler, PieceKeeper):  # (the keeper's own: pieces kept for the final shuffle)
            patch.setattr(kind, "append", appending(kind.append))
        yield calls


def group_commits_every_other_unit(monkeypatch) -> None:
    """Group commit made to happen, by work done: ``runner._UnitCommits.ready`` says a commit
    is still running at every other chance after the first, so the units appended meanwhile are
    journaled together by the next (the ``wait`` that follows a "ready" joins the one running)."""
    from bert_data.run import runner

    chances: List[bool] = []

    def every_other(self):
        chances.append(self.background is not None)
        return not chances[-1] or len(chances) % 2 == 0

    monkeypatch.setattr(runner._UnitCommits, "ready", every_other)
