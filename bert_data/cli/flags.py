"""Command-line conventions shared by ``create_tfrecords``, ``bert-data`` and its subcommands and
``bert-data build-vocab``: absl-style booleans (what Google's and ALBERT's
``create_pretraining_data.py`` accept), parsers that accept no abbreviations, and usage errors
in one line that name the fix (:class:`Parser`).

absl booleans: ``--flag``, ``--flag=true|false`` (also True/False, 1/0, yes/no, t/f, y/n) and
``--noflag``; and, as many tools accept, ``--flag false`` with the value as a separate word.
Only a boolean word is taken as the value: ``--quiet corpus.txt`` leaves ``corpus.txt`` a stray
argument, reported as such.  (absl itself reads ``--flag false`` as ``--flag`` plus a leftover
word that Google's script ignores, i.e. as true: the opposite of what was typed.)

A mistyped option is one line naming the closest real one (``unknown option --max_seq_len;
did you mean --max_seq_length?``) and pointing to ``--help``, instead of argparse's usage
message of some forty lines before the line that matters.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
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
    """``--flag=true`` and ``--flag true`` -> ``--flag``, ``--flag=false`` and ``--flag false`` ->
    ``--noflag``; a value after ``=`` that is not a boolean is a usage error naming the flag, and
    a separate word that is not a boolean is left alone (a stray argument, reported as such)."""
    flags = bool_options(parser)
    out = []
    argv = list(argv)
    index = 0
    while index < len(argv):
        arg = argv[index]
        index += 1
        if arg == "--":
            return out + argv[index - 1:]
        name, equals, value = arg.partition("=")
        if name not in flags:
            out.append(arg)
            continue
        if not equals:
            if index < len(argv) and parse_bool(argv[index]) is not None:  # --flag false
                value = argv[index]
                index += 1
            else:
                out.append(arg)
                continue
        positive, negative, is_negative = flags[name]
        meaning = parse_bool(value)
        if meaning is None or is_negative:
            what = "takes no value" if is_negative else f"expects true or false, got {value!r}"
            parser.error(f"{name} {what}")
        out.append(positive if meaning else negative)
    return out


_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def closest(word: str, candidates: Sequence[str]) -> Optional[str]:
    """The candidate ``word`` most likely mistypes (difflib, case ignored), or None."""
    by_lower = {candidate.lower(): candidate for candidate in candidates}
    found = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[found[0]] if found else None


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line, what is wrong and what to do,
    pointing to ``--help`` instead of printing the usage: an unknown option names the closest
    real one, a choice not offered the closest choice.  No abbreviations are accepted.  Its
    subcommands' parsers are of this class too."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._arguments_seen: List[str] = []

    def parse_known_args(self, args=None, namespace=None):
        import sys

        self._arguments_seen = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def parse_args(self, args=None, namespace=None):
        args, extras = self.parse_known_args(args, namespace)
        if extras:
            chosen = self._subcommand_parser(args)
            misplaced = [arg for arg in extras if arg.startswith("-") and not chosen._unknown_option(arg)]
            if chosen is not self and misplaced:  # an option of the subcommand given before it
                name = misplaced[0].partition("=")[0]
                self.exit(2, f"{self.prog}: error: {name} is an option of {chosen.prog}: give it after the "
                             f"command ({chosen.prog} ... {name}; see {chosen.prog} --help)\n")
            chosen.unknown(extras)
        return args

    def error(self, message: str):
        if message.startswith("the following arguments are required"):
            unknown = [arg for arg in self._arguments_seen if self._unknown_option(arg)]
            if unknown:  # the mistyped option is why the required one seems missing: name it
                self.unknown(unknown)
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def unknown(self, extras: Sequence[str]):
        """Report the first of the arguments no option took, and exit."""
        options = [arg for arg in extras if self._unknown_option(arg)]
        if options:
            name = options[0].partition("=")[0]
            guess = closest(name, self._visible_options())
            hint = f"; did you mean {guess}?" if guess else ""
            self.exit(2, f"{self.prog}: error: unknown option {name}{hint} (see {self.prog} --help)\n")
        word = extras[0]
        seen = self._arguments_seen
        after = seen[seen.index(word) - 1] if word in seen and seen.index(word) > 0 else None
        where = f" after {after}" if after and after.startswith("-") else ""
        if after and isinstance(self._option_string_actions.get(after.partition("=")[0]), BoolFlag):
            where += " (which takes no value, or true or false)"
        self.exit(2, f"{self.prog}: error: unexpected argument {word!r}{where}: no option takes it "
                     f"(see {self.prog} --help)\n")

    def _check_value(self, action, value):
        if action.choices is not None and value not in action.choices:
            choices = [str(choice) for choice in action.choices]
            guess = closest(str(value), choices)
            hint = f"; did you mean {guess}?" if guess else ""
            raise argparse.ArgumentError(action, f"invalid choice: {value!r} (choose from {', '.join(choices)}){hint}")

    def _unknown_option(self, arg: str) -> bool:
        return (arg.startswith("-") and len(arg) > 1 and arg != "--" and not _NEGATIVE_NUMBER.match(arg)
                and arg.partition("=")[0] not in self._option_string_actions)

    def _visible_options(self) -> List[str]:
        return [string for action in self._actions if action.help != argparse.SUPPRESS
                for string in action.option_strings]

    def _subcommand_parser(self, namespace) -> "Parser":
        """The parser of the subcommand given (whose options the extras were meant for), else this one."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(namespace, action.dest, None) or "")
                if isinstance(chosen, Parser):
                    return chosen
        return self
# Every option (and positional argument) of every command that names a file, a directory or a
# list of them: ``expand_home`` expands a leading ``~`` in their values.
PATH_OPTIONS = ("metadata_files", "input_files", "input_files_prefix", "val_metadata_files", "vocab_file",
                "tokenizer_file", "spm_model_file", "spacy_model", "output_dir", "work_dir", "input_file",
                "output_file", "out", "shard", "paths", "plot", "decontaminate")


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
