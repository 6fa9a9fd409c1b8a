"""Fault injection seams for the test suite only, read only when their variable is set: a run
is stopped at a point chosen by work done (a step of finalizing, a unit journaled), never by time.
"""

from __future__ import annotations

import os
import signal
import sys

# Fault injection for the test suite only: SIGKILL this process at the N-th step of finalizing
# (counted from 1; a step is one shard renamed or uploaded, one manifest written, the clean-up).
# Read only when set.
KILL_AT_FINALIZE_STEP = "BERT_DATA_TEST_KILL_AT_FINALIZE_STEP"


class FinalizeSteps:
    def __init__(self):
        chosen = os.environ.get(KILL_AT_FINALIZE_STEP)
        self.kill_at, self.done = (int(chosen) if chosen else None), 0

    def __call__(self) -> None:
        self.done += 1
        if self.done == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)


# Fault injection for the test suite only: after the N-th unit is journaled, say so on stderr and
# wait for a signal, so that a test interrupts a run at a chosen unit (by work done, not by time),
# or changes the world (stops a storage server) and lets it go on with SIGUSR1.
# Read only when set.
PAUSE_AFTER_UNIT = "BERT_DATA_TEST_PAUSE_AFTER_UNIT"
GO_ON = signal.SIGUSR1


def pause_armed() -> bool:
    """Whether a test chose a unit to pause after (the run then journals one unit at a time)."""
    return bool(os.environ.get(PAUSE_AFTER_UNIT))


def pause_if_chosen(units_done: int) -> None:
    chosen = os.environ.get(PAUSE_AFTER_UNIT)
    if chosen and int(chosen) == units_done:
        # SIGUSR1 blocked before the line is printed: one sent after it is never lost.  Blocked
        # in this thread only: between two waits (a busy machine may hold this thread there for
        # long) the kernel gives a signal sent to the process to another thread (a pool's, a
        # storage library's), where its default action would kill the run; a handler of our
        # own, for the time of the pause, takes it there instead.
        released = []
        previous = signal.signal(GO_ON, lambda signum, frame: released.append(signum))
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {GO_ON})
        try:
            print(f"bert_data: test: paused after unit {units_done}", file=sys.stderr, flush=True)
            # Any other signal's handler (it raises, or it kills) ends the wait as well: it runs
            # when the wait is interrupted, or between waits.
            while not released and signal.sigtimedwait({GO_ON}, 1.0) is None:
                pass
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            signal.signal(GO_ON, signal.SIG_DFL if previous is None else previous)
