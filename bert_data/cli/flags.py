"""Command-line conventions shared by ``create_tfrecords`` and ``bert-data build-vocab``: absl-style
booleans (what Google's and ALBERT's ``create_pretraining_data.py`` accept) and parsers that
accept no abbreviations.

absl booleans: ``--flag``, ``--flag=true|false`` (also True/False, 1/0, yes/no, t/f, y/n) and
``--noflag``.  The value is only ever attached with ``=``: absl reads ``--flag false`` as
``--flag`` plus a stray word, so that form is refused here (argparse reports the stray word)
rather than read one way or the other.
"""

from __future__ import annotations

import argparse
import os
from typing import List, Optional, Sequence

TRUE_WORDS = ("true", "t", "1", "yes", "y")
FALSE_WORDS = ("false", "f", "0", "no", "n")


def parse_bool(text: str) -> Optional[bool]:
    lowered = text.strip().lower()
    if lowered in TRUE_WORDS:
        return True
    if lowered in FALSE_WORDS:
        return False
    return None


class BoolFlag(argparse.Action):
    """``--name`` sets True, ``--noname`` False (``--name=VALUE`` is rewritten to one of those by
    :func:`parse_args`)."""

    def __init__(self, option_strings, dest, default=None, help=None, negatives=()):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)
        self.negatives = tuple(negatives)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, option_string not in self.negatives)

    def format_usage(self) -> str:
        return self.option_strings[0]


def add_bool(group, *names: str, default: Optional[bool] = False, help: str = "", dest: Optional[str] = None):
    """A boolean option under each of ``names`` (aliases), each also as ``--noNAME``."""
    negatives = ["--no" + name[2:] for name in names]
    return group.add_argument(*names, *negatives, action=BoolFlag, default=default, help=help, dest=dest,
                              negatives=negatives)


def bool_options(parser: argparse.ArgumentParser) -> dict:
    """option string -> (positive form, negative form, whether it is a negative form) of every
    BoolFlag."""
    found = {}
    for action in parser._actions:
        if isinstance(action, BoolFlag):
            positive = next(s for s in action.option_strings if s not in action.negatives)
            for string in action.option_strings:
                found[string] = (positive, action.negatives[0], string in action.negatives)
    return found


def rewrite_bool_values(parser: argparse.ArgumentParser, argv: Sequence[str]) -> List[str]:
    """``--flag=true`` -> ``--flag``, ``--flag=false`` -> ``--noflag``; a value that is not a
    boolean is a usage error naming the flag."""
    flags = bool_options(parser)
    out = []
    for index, arg in enumerate(argv):
        if arg == "--":
            return out + list(argv[index:])
        name, equals, value = arg.partition("=")
        if not equals or name not in flags:
            out.append(arg)
            continue
        positive, negative, is_negative = flags[name]
        meaning = parse_bool(value)
        if meaning is None or is_negative:
            what = "takes no value" if is_negative else f"expects true or false, got {value!r}"
            parser.error(f"{name} {what}")
        out.append(positive if meaning else negative)
    return out


# Every option (and positional argument) of every command that names a file, a directory or a
# list of them: ``expand_home`` expands a leading ``~`` in their values.
PATH_OPTIONS = ("metadata_files", "input_files", "input_files_prefix", "val_metadata_files", "vocab_file",
                "tokenizer_file", "spm_model_file", "spacy_model", "output_dir", "work_dir", "input_file",
                "output_file", "out", "shard", "paths", "plot")


def expand_home(args: argparse.Namespace) -> argparse.Namespace:
    """``~`` and ``~user`` at the start of a path option's value, or of any of its comma-separated
    parts (``--input_file=~/a.txt,~/b.txt``), become the home directory, as a shell would have
    expanded them had it seen them: no shell expands ``~`` after ``=`` (``--output_dir=~/x``), and
    a literal ``./~/x`` is never what was meant.  The one place it is done, for every command,
    at parsing: the library takes paths as Python's ``open`` does."""
    for name in PATH_OPTIONS:
        value = getattr(args, name, None)
        if isinstance(value, str):
            setattr(args, name, _expand_home(value))
        elif isinstance(value, list):
            setattr(args, name, [_expand_home(item) if isinstance(item, str) else item for item in value])
    return args


def _expand_home(value: str) -> str:
    if "~" not in value:
        return value
    return ",".join(os.path.expanduser(part.strip()) if part.strip().startswith("~") else part
                    for part in value.split(","))


def parse_args(parser: argparse.ArgumentParser, argv: Optional[Sequence[str]]) -> argparse.Namespace:
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    return expand_home(parser.parse_args(rewrite_bool_values(parser, argv)))
