"""Where documents begin and end in the bytes of a file holding many: separator lines (blank
lines by default), or line breaks for JSON Lines.  The planner (over a memory map of a whole
file, or a stream: a compressed file or a URL) and the reader (over the bytes of one range)
both call these, so they agree on what a document is.
"""

from __future__ import annotations

import re
from typing import BinaryIO, Iterable, Iterator, List, Optional, Tuple

import numpy as np

from .files import READ_CHUNK


def separator_pattern(separator_line: Optional[str]) -> "re.Pattern[bytes]":
    """A regex matching one whole separator line (with its newline) in UTF-8 bytes.

    ``None`` means documents are separated by blank (or white-space only) lines.
    """
    if separator_line is None:
        return re.compile(rb"(?m)^[ \t\r\f\v]*(?:\n|\Z)")
    return re.compile(
        rb"(?m)^[ \t\r\f\v]*" + re.escape(separator_line.encode("utf-8")) + rb"[ \t\r\f\v]*(?:\n|\Z)"
    )


_NON_SPACE = re.compile(rb"\S")


def document_spans(buffer, start: int, end: int, pattern) -> Iterator[Tuple[int, int]]:
    """Byte spans of the non-blank documents in ``buffer[start:end]``.

    The planner (over a memory map of the whole file) and the reader (over the bytes of one
    unit) both call this, so they agree on what a document is.  Line by line (JSON Lines), a
    block at a time (``line_span_blocks``); ``pattern_spans`` is the reference.
    """
    if pattern is LINE_PATTERN:
        for starts, ends in line_span_blocks(buffer, start, end):
            yield from zip(starts.tolist(), ends.tolist())
        return
    yield from pattern_spans(buffer, start, end, pattern)


def pattern_spans(buffer, start: int, end: int, pattern) -> Iterator[Tuple[int, int]]:
    """``document_spans`` by ``pattern``'s matches and a search between each two."""
    position = start
    for match in pattern.finditer(buffer, start, end):
        if match.start() > position and _NON_SPACE.search(buffer, position, match.start()):
            yield position, match.start()
        position = max(position, match.end())
    if end > position and _NON_SPACE.search(buffer, position, end):
        yield position, end


# JSON Lines: every line break ends a document; blank lines hold none.
LINE_PATTERN = re.compile(rb"\n")

# Bytes of a buffer scanned at once by ``line_span_blocks`` (numpy: a few bytes each, passing).
LINE_BLOCK = 1 << 22
# What ``\S`` leaves out in a bytes pattern: ASCII white space.
_SPACE_BYTES = np.zeros(256, bool)
_SPACE_BYTES[list(b" \t\n\r\f\v")] = True


def line_span_blocks(buffer, start: int, end: int,
                     block: int = LINE_BLOCK) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
    """``document_spans(buffer, start, end, LINE_PATTERN)``, a block of about ``block`` bytes
    (cut after a line break) at a time, as two int64 arrays (each line's start and end, its
    line break left out): the lines holding a byte other than ASCII white space.  Whole-block
    numpy, not a regex match and a search a line: a JSON Lines file holds millions."""
    position = start
    while position < end:
        stop = min(end, position + block)
        if stop < end:
            cut = buffer.rfind(b"\n", position, stop)
            if cut < 0:  # a line longer than a block: the block runs to its end
                cut = buffer.find(b"\n", stop, end)
            stop = end if cut < 0 else cut + 1
        data = np.frombuffer(buffer, np.uint8, stop - position, position)
        breaks = np.flatnonzero(data == 10)
        starts = np.concatenate([[0], breaks + 1]) + position
        ends = np.concatenate([breaks, [len(data)]]) + position
        # A line with text: its first byte is not white space (a JSON object's brace), else a
        # search finds a byte that is not (the few lines that start with white space).
        nonempty = ends > starts  # (so a block's empty tail after its last break drops out)
        text = np.zeros(len(starts), bool)
        text[nonempty] = ~_SPACE_BYTES[data[starts[nonempty] - position]]
        for line in np.flatnonzero(nonempty & ~text).tolist():
            text[line] = _NON_SPACE.search(buffer, int(starts[line]), int(ends[line])) is not None
        yield starts[text], ends[text]
        position = stop


def group_span_blocks(blocks: Iterable[Tuple[np.ndarray, np.ndarray]], max_docs: int,
                      max_bytes: int) -> Iterator[Tuple[int, int, int, int]]:
    """``planner.group_spans`` of the spans of ``line_span_blocks``: a bisection a run, not a
    step a document."""
    first = start = last_end = 0
    open_run, before = False, 0  # a run not yet ended; documents in the blocks before
    for starts, ends in blocks:
        i, k = 0, len(starts)
        while i < k:
            if not open_run:
                first, start, open_run = before + i, int(starts[i]), True
            # The run ends at its max_docs-th document or the first that brings it to max_bytes.
            j = min(first + max_docs - 1 - before, int(np.searchsorted(ends, start + max_bytes, "left")))
            if j >= k:
                last_end, i = int(ends[-1]), k
                break
            yield first, before + j + 1 - first, start, int(ends[j])
            open_run, i = False, j + 1
        before += k
    if open_run:
        yield first, before - first, start, last_end


def stream_document_spans(stream: BinaryIO, pattern, chunk_size: int = READ_CHUNK) -> Iterator[Tuple[int, int]]:
    """What ``document_spans`` finds over a whole stream, reading it in chunks: at most one chunk
    and one line (however long) are held.  Separators are whole lines, so each block, cut after
    its last line break, is scanned on its own; a document may run on across blocks."""
    base = 0  # offset in the stream of the block scanned
    doc_start = 0
    has_text = False  # the current document has non-space bytes in the blocks already scanned
    pending: List[bytes] = []  # the unfinished last line
    while True:
        chunk = stream.read(chunk_size)
        if chunk:
            cut = chunk.rfind(b"\n") + 1
            if not cut:
                pending.append(chunk)
                continue
            pending.append(chunk[:cut] if cut < len(chunk) else chunk)
            block = pending[0] if len(pending) == 1 else b"".join(pending)
            pending = [chunk[cut:]] if cut < len(chunk) else []
        else:
            block = b"".join(pending)
            pending = []
        position = 0
        for match in pattern.finditer(block):
            if match.start() == match.end():  # only at the block's end: no separator line
                continue
            if has_text or (match.start() > position and _NON_SPACE.search(block, position, match.start())):
                yield doc_start, base + match.start()
            doc_start, position, has_text = base + match.end(), match.end(), False
        has_text = has_text or bool(_NON_SPACE.search(block, position))
        base += len(block)
        if not chunk:
            break
    if has_text:
        yield doc_start, base
