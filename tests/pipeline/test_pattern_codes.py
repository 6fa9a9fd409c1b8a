"""Compiled regular expressions kept as data (bert_data/pipeline/pattern_codes.py): a pattern made
from stored code matches as ``re.compile``'s does, and code that does not fit this Python, or that
``_sre`` refuses, is compiled the usual way."""

from __future__ import annotations

import json
import random
import re

import pytest

from bert_data.pipeline import pattern_codes
from bert_data.pipeline.pattern_codes import Patterns

PATTERNS = [
    (r"(?<=[0-9a-zà-ÿ])\.$|(?P<dots>\.\.+)$|(?<=°[FfCcKk])\.$", re.UNICODE),
    (r"^(?:US|C|A)\$|^[\(\[\{«“]", 0),
    (r"[\u2600-\u27bf\U0001F300-\U0001FAFF]+|(?i:http)s?://\S+", 0),
    (r"(?<=[a-z\U00010400-\U0001044F])\.(?=[A-Z\U00010400])|[^\U0001F300-\U0001FAFF]x|[\U0001F600]", 0),
]


def _strings() -> list[str]:
    rng = random.Random(5)
    alphabet = list("aZ09.$(«“°Fk ") + ["US", "http://", "HTTPS://x", "☺", "😀", "…", "é"]
    return ["".join(rng.choices(alphabet, k=rng.randint(0, 12))) for _ in range(3000)]


def _same(a: "re.Pattern[str]", b: "re.Pattern[str]", strings: list[str]) -> None:
    assert (a.pattern, a.flags, a.groups, a.groupindex) == (b.pattern, b.flags, b.groups, b.groupindex)
    for s in strings:
        assert [(m.span(), m.groups()) for m in a.finditer(s)] == [(m.span(), m.groups()) for m in b.finditer(s)], s


def test_patterns_from_stored_code_match_as_compiled_ones():
    recording = Patterns()
    for pattern, flags in PATTERNS:
        recording.compile(pattern, flags)
    stored = json.loads(json.dumps(recording.stored()))  # as the rules cache keeps it
    assert len(stored["codes"]) == len(PATTERNS)
    replaying = Patterns(stored)
    compiled_by_re = []
    real_compile = re.compile

    def counting(*args, **kwargs):
        compiled_by_re.append(args[0])
        return real_compile(*args, **kwargs)

    strings = _strings()
    try:
        pattern_codes.re.compile = counting
        made = [replaying.compile(pattern, flags) for pattern, flags in PATTERNS]
    finally:
        pattern_codes.re.compile = real_compile
    assert compiled_by_re == []  # made from the code, not compiled
    for (pattern, flags), pattern_made in zip(PATTERNS, made):
        _same(pattern_made, re.compile(pattern, flags), strings)


@pytest.mark.parametrize("damage", ["other_python", "refused_code", "missing"])
def test_code_that_does_not_fit_is_compiled_the_usual_way(damage):
    recording = Patterns()
    pattern, flags = PATTERNS[0]
    recording.compile(pattern, flags)
    stored = json.loads(json.dumps(recording.stored()))
    if damage == "other_python":
        stored["python"] = [0, 0]
    elif damage == "refused_code":
        [data] = stored["codes"].values()
        data["code"] = data["code"][: len(data["code"]) // 2]  # cut in the middle: invalid
    else:
        stored["codes"] = {}
    _same(Patterns(stored).compile(pattern, flags), re.compile(pattern, flags), _strings())


def test_wide_classes_are_split_and_match_the_same_characters():
    """A class reaching past U+FFFF is made a table below U+10000 and the rest tried only past
    it (``re`` tests such a class range by range): the same characters match, every one of them,
    inside lookbehinds too; negated classes and narrow ones are left as they are."""
    from re import _parser

    wide = r"[a-z\u00e0-\u00ff\u2600-\u27bf\U0001F300-\U0001FAFF\U00010400]"
    parsed = _parser.parse(wide)
    pattern_codes._split_wide_classes(parsed)
    assert parsed.data[0][0] is _parser.BRANCH
    for narrow in (r"[a-z\u2600]", r"[^\U0001F300-\U0001FAFF]"):
        parsed = _parser.parse(narrow)
        pattern_codes._split_wide_classes(parsed)
        assert parsed.data[0][0] is _parser.IN
    made = Patterns().compile(f"(?<={wide})x|{wide}")
    expected = re.compile(f"(?<={wide})x|{wide}")
    for code in range(0x110000):
        c = chr(code)
        assert (made.match(c) is None) == (expected.match(c) is None), hex(code)
        assert (made.search(c + "x", 1) is None) == (expected.search(c + "x", 1) is None), hex(code)
