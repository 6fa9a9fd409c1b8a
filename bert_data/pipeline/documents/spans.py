"""Where documents begin and end in the bytes of a file holding many: separator lines (blank
lines by default), or line breaks for JSON Lines.  The planner (over a memory map of a whole
file, or a stream: a compressed file or a URL) and the reader (over the bytes of one range)
both call these, so they agree on what a document is.
"""

from __future__ import annotations

import re
from typing import BinaryIO, Iterator, List, Optional, Tuple

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
    unit) both call this, so they agree on what a document is.
    """
    position = start
    for match in pattern.finditer(buffer, start, end):
        if match.start() > position and _NON_SPACE.search(buffer, position, match.start()):
            yield position, match.start()
        position = max(position, match.end())
    if end > position and _NON_SPACE.search(buffer, position, end):
        yield position, end


# JSON Lines: every line break ends a document; blank lines hold none.
LINE_PATTERN = re.compile(rb"\n")


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
