"""The runner's final pass: every shard not yet shuffled, a ``shard_shuffle`` task each, run on
the executor (or here), made durable, journaled and put in place in the order the tasks end.

The sources are the shards in progress, or with pieces kept (``kept_pieces``) each shard's
segments of them.  Once the journal says a shard is shuffled, its segments are given back to the
file system (``storage.release_blocks``: holes punched in the pieces, a few megabytes of a piece
at a time), and a kept piece is removed once every shard it holds segments of is: both by the
run's removals thread (``storage.BackgroundRemovals``), while the next shards are shuffled.  So
the work directory shrinks as the shards grow (at its peak the disk held the output 1.25-1.3 times,
not twice, on the shared corpus), and the page cache of what no task reads again is freed as
the shuffle goes, not all at the run's end (a worker keeps the pieces it read mapped).
"""

from __future__ import annotations

import concurrent.futures as cf
from typing import Callable, Dict, List, Optional

import numpy as np

from .. import storage
from ..format.dataset_layout import SPLIT_CODES
from .assembly import ShardAssembler
from .executors import InlineExecutor, wait_first
from .kept_pieces import SEGMENT_FIELDS, PieceKeeper
from .planning import Plan
from .run_files import remove_shards_being_shuffled, shard_in_progress, write_journal
from .scheduler import Scheduler
from .shard_shuffle import ShuffleCommits, ShuffleTask, publish_shuffled, run_shuffle_task, shuffle_tasks, shuffled_size
from .specs import OutputSpec
from .totals import RunTotals


def shuffle_shards(staged: OutputSpec, plan: Plan, totals: RunTotals, sizes: Dict[str, int],
                   assembler: ShardAssembler, journal_dir: str, executor: Optional[cf.Executor],
                   scheduler: Scheduler, bar, units_journaled: Callable[[], Optional[BaseException]],
                   removals: Optional[storage.BackgroundRemovals] = None) -> None:
    """The final pass (``shard_shuffle``): every shard not yet shuffled, a task each (on the
    executor when its workers see these files, else here).  Each task is written beside its
    shards in progress, made durable and journaled (its keys and new sizes), then put in their
    place, so a resumed run finds every shard either whole and unshuffled (or its kept pieces
    whole) or shuffled, never half (``ShuffleCommits``: in a thread, while the next tasks run).
    ``units_journaled`` returns once the last unit is journaled (it is, in a thread, while the
    first tasks run), with its error if it failed: no shuffled shard is journaled before the
    units it holds.  ``bar``: the progress bar, of shards."""
    checksums = assembler.checksums
    keeper = assembler if isinstance(assembler, PieceKeeper) else None
    shuffles: List[ShuffleTask] = []
    segments: Dict[str, np.ndarray] = {}  # with pieces kept: each shard's segments
    for split, directory in staged.split_dirs().items():
        paths = [shard_in_progress(directory, staged, shard) for shard in range(totals.shard_counts[split])]
        shuffles += shuffle_tasks(staged, SPLIT_CODES[split], split, paths, paths)
        if keeper is not None:
            segments.update({f"{split}/{shard}": rows for shard, rows in enumerate(keeper.segments_of(split))})
    done = set(totals.shuffled)
    pieces_left = _PiecesLeft(keeper, segments, done, removals)
    # The shards handed to the commits, in order, and how many of them are given back: a record
    # counts the tasks before its own, and the commits journal a group of tasks by its last
    # record only (``ShuffleCommits``), so each journal gives back all those not yet given back.
    added: List[str] = []
    given_back = [0]

    def finished(shuffle: ShuffleTask, digests: Dict[str, str]) -> None:
        if set(shuffle.keys) <= done:
            publish_shuffled(shuffle)
            return
        for key, target in zip(shuffle.keys, shuffle.targets):
            sizes[key] = shuffled_size(target)
        totals.shuffled += shuffle.keys
        totals.shuffled_sha256.update(digests)
        done.update(shuffle.keys)
        record = (dict(sizes), {key: list(value) for key, value in checksums.items()}, totals.to_json())  # as of now
        kept = assembler.kept()
        added.extend(shuffle.keys)
        counted = len(added)

        def journal() -> None:  # (in the commits' thread, in the order the tasks finished)
            error = units_journaled()
            if error is not None:
                raise error
            write_journal(journal_dir, plan.fingerprint, *record, record=plan.record, kept=kept)
            pieces_left.shuffled(added[given_back[0]:counted])
            given_back[0] = counted

        commits.add(shuffle, journal)

    pending = []
    for shuffle in shuffles:
        if set(shuffle.keys) <= done:
            publish_shuffled(shuffle)  # journaled, perhaps not yet in place
        else:
            remove_shards_being_shuffled(shuffle.targets)  # half written by an interrupted run
            pending.append(_reading_pieces(shuffle, segments, keeper) if keeper is not None else shuffle)
    commits = ShuffleCommits()
    try:
        if executor is None:
            for shuffle in pending:
                finished(shuffle, run_shuffle_task(shuffle))
                bar.update(len(shuffle.keys))
        else:
            _shuffle_on(executor, scheduler, pending, finished, bar)
    except BaseException:
        commits.finish(quietly=True)  # the tasks done are kept; the error met is the one raised
        raise
    commits.finish()


def _reading_pieces(shuffle: ShuffleTask, segments: Dict[str, np.ndarray], keeper: PieceKeeper) -> ShuffleTask:
    """``shuffle`` reading its shards' segments of the kept pieces (only the pieces it reads
    named in the task: it goes to a worker)."""
    rows = [segments[key] for key in shuffle.keys]
    used = np.unique(np.concatenate([found[:, 0] for found in rows])) if rows else np.zeros(0, dtype=np.int64)
    shuffle.pieces = [keeper.pieces[piece] for piece in used.tolist()]
    shuffle.segments = []
    for found in rows:
        found = found[:, :4].copy()  # (piece, offset, length, records: what the task reads)
        found[:, 0] = np.searchsorted(used, found[:, 0])
        shuffle.segments.append(found)
    return shuffle


# A piece's segments are given back once this many of its bytes are spent, or when it is removed:
# each hole costs a system call and a transaction of the file system's journal (about 0.1 ms), and
# a unit of short documents has a small segment of every shard (200,000 of them: 2,000 segments
# of 114 KB).  Adjacent segments spent are given back as one range.
RELEASE_BYTES = 4 << 20


class _PiecesLeft:
    """The kept pieces' segments of shards not yet shuffled, counted: a piece none of whose
    shards is left is removed, the segments of the shards done are given back in the others
    (``shuffled``, once the journal says those shards are done; those of shards journaled by
    an interrupted run at once), ``RELEASE_BYTES`` of a piece at a time."""

    def __init__(self, keeper: Optional[PieceKeeper], segments: Dict[str, np.ndarray], done: set,
                 removals: Optional[storage.BackgroundRemovals]):
        self.keeper, self.segments, self.removals = keeper, segments, removals
        if keeper is None or removals is None:
            self.keeper = None
            return
        waiting = [rows[:, 0] for key, rows in segments.items() if key not in done]
        self.left = np.bincount(np.concatenate(waiting) if waiting else np.zeros(0, dtype=np.int64),
                                minlength=len(keeper.pieces))
        self.spent = np.zeros((0, len(SEGMENT_FIELDS) - 1), dtype=np.int64)  # not yet given back
        self._remove(np.flatnonzero(self.left == 0), [key for key in segments if key in done])

    def shuffled(self, keys: List[str]) -> None:
        if self.keeper is None or not keys:
            return
        used = np.concatenate([self.segments[key][:, 0] for key in keys])
        np.subtract.at(self.left, used, 1)
        self._remove(np.unique(used[self.left[used] == 0]), keys)

    def _remove(self, pieces: np.ndarray, keys: List[str]) -> None:
        # Given back first, even in a piece removed next: a worker that shuffled from it keeps it
        # mapped (``shard_shuffle.forget_pieces``), and a file's pages outlive its name until
        # the last map of it goes, at the end of the run; a hole frees them now.  Not once every
        # shard is shuffled: the run's end is now, and the holes would only make it wait.
        spent = np.concatenate([self.spent] + [self.segments[key] for key in keys])
        if not self.left.any():
            spent = spent[:0]
        else:
            enough = np.bincount(spent[:, 0], weights=spent[:, 2], minlength=len(self.left)) >= RELEASE_BYTES
            ready = enough[spent[:, 0]] | (self.left[spent[:, 0]] == 0)
            if ready.any():
                self.removals.release(self.keeper.spent(spent[ready]))
            spent = spent[~ready]
        self.spent = spent
        if len(pieces):
            self.removals.remove([self.keeper.pieces[piece] for piece in pieces.tolist()])


def _shuffle_on(executor: cf.Executor, scheduler: Scheduler, pending: list, finished: Callable, bar) -> None:
    """``shuffle_shards``' tasks on the executor's workers, ``finished`` in the order they end."""
    waiting, running = list(reversed(pending)), {}

    def submit() -> None:
        while waiting and len(running) < scheduler.parallelism:
            shuffle = waiting.pop()
            future = executor.submit(run_shuffle_task, shuffle)
            running[future] = shuffle
            scheduler.in_flight[future] = ("shuffle", len(running), None)  # cancelled with the rest on a stop

    while waiting or running:
        submit()
        ended, _ = wait_first(list(running), executor)
        done_now, failures = [], []
        for future in ended:
            shuffle = running.pop(future)
            scheduler.in_flight.pop(future)
            try:
                done_now.append((shuffle, future.result()))
            except BaseException as error:  # noqa: BLE001 - raised below, once the others are kept
                failures.append(error)
        # The workers' next shards first, then these handed to the commits' thread (not inline:
        # the next shard would run first, and its failure would leave these unkept).
        if not failures and not isinstance(executor, InlineExecutor):
            submit()
        for shuffle, digests in done_now:  # each journaled as it is done
            finished(shuffle, digests)
            bar.update(len(shuffle.keys))
        if failures:
            raise failures[0]
