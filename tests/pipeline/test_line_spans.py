"""JSON Lines' documents found a block of bytes at a time with numpy (``line_span_blocks``) and
grouped into slices by bisection (``group_span_blocks``) are exactly those of the reference, a
regex match and a search a line (``pattern_spans``) grouped a document at a time
(``planner.group_spans``): on hostile bytes (blank and white-space-only lines, every ASCII
white space, CR without LF, UTF-8 and invalid bytes, lines longer than a block, no final line
break), with blocks from one byte up, over bytes and a memory map, from any start to any end."""

from __future__ import annotations

import mmap
import random

import pytest

from bert_data.pipeline.documents.planner import group_spans
from bert_data.pipeline.documents.spans import (LINE_PATTERN, document_spans, group_span_blocks, line_span_blocks,
                                                pattern_spans)

PIECES = [b"{\"text\": \"a\"}", b"word", b" ", b"\t", b"\r", b"\x0b", b"\x0c", b"\n", b"\n", b"\n\n", b"\r\n",
          b"\xc2\xa0", b"\xe4\xb8\xad", b"\xff", b"\x00", b"x" * 40, b"\x1c", b"\x85"]


def _buffer(rng: random.Random) -> bytes:
    return b"".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 80)))


def _blocks_flat(buffer, start, end, block):
    return [(a, b) for starts, ends in line_span_blocks(buffer, start, end, block)
            for a, b in zip(starts.tolist(), ends.tolist())]


@pytest.mark.parametrize("seed", range(4))
def test_line_span_blocks_are_the_pattern_spans(seed):
    rng = random.Random(seed)
    for _ in range(80):
        data = _buffer(rng)
        start = rng.randrange(0, len(data) + 1)
        end = rng.randrange(start, len(data) + 1)
        expected = list(pattern_spans(data, start, end, LINE_PATTERN))
        for block in ((1, 2, 7) if end - start < 200 else ()) + (64, 1 << 22):
            assert _blocks_flat(data, start, end, block) == expected
        assert list(document_spans(data, start, end, LINE_PATTERN)) == expected


def test_over_a_memory_map(tmp_path):
    rng = random.Random(3)
    data = b"".join(_buffer(rng) for _ in range(200)) + b"last line, no break"
    path = tmp_path / "lines.jsonl"
    path.write_bytes(data)
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        expected = list(pattern_spans(buf, 0, len(data), LINE_PATTERN))
        assert len(expected) > 100
        for block in (5, 100, 4096):
            assert _blocks_flat(buf, 0, len(data), block) == expected


@pytest.mark.parametrize("seed", range(3))
def test_groups_by_bisection_are_the_groups_a_document_at_a_time(seed):
    rng = random.Random(100 + seed)
    for _ in range(30):
        data = b"".join(_buffer(rng) for _ in range(rng.randrange(1, 12)))
        spans = list(pattern_spans(data, 0, len(data), LINE_PATTERN))
        for max_docs, max_bytes in ((1, 10**9), (3, 10**9), (10**9, 1), (4, 60), (7, 200), (10**9, 10**9)):
            expected = list(group_spans(iter(spans), max_docs, max_bytes))
            for block in (17, 300, 1 << 22):
                found = list(group_span_blocks(line_span_blocks(data, 0, len(data), block), max_docs, max_bytes))
                assert found == expected
