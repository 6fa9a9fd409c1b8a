"""Train a BERT WordPiece vocabulary (``vocab.txt``) from raw text.

Uses Hugging Face ``tokenizers``' ``WordPieceTrainer`` behind the same normalizer and
pre-tokenizer as ``bert_data.tokenization.WordPieceTokenizer`` (BERT's), so the
resulting vocabulary fits that tokenizer. The special tokens come first, in the order
[PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4).

CLI (wired as ``bert-data build-vocab``)::

    bert-data build-vocab --metadata_files examples/sample/metadata.txt \\
        --input_files_prefix examples/sample --vocab_size 4000 --do_lower_case \\
        --out vocab/vocab.txt

For real pretraining, use the vocabulary of the model you start from (e.g. BERT-Base
uncased); a vocabulary trained here only suits models trained from scratch.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator, Sequence

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

__all__ = ["SPECIAL_TOKENS", "train_wordpiece_vocab", "write_vocab", "read_metadata",
           "iter_texts", "build_vocab_main"]


def train_wordpiece_vocab(texts_iterator: Iterable[str], vocab_size: int = 30522,
                          do_lower_case: bool = True, min_frequency: int = 2,
                          limit_alphabet: int = 1000) -> list[str]:
    """Train a WordPiece vocabulary; returns the tokens in id order (specials first).

    ``texts_iterator`` yields texts of any length (lines, paragraphs or documents). It is
    read twice: pass a re-iterable (a list, or an object whose ``__iter__`` starts over);
    a one-shot iterator is first collected into a list. The result may be smaller than
    ``vocab_size`` when the corpus does not support more pieces, or larger when the
    special tokens, the alphabet and its ``##`` forms alone exceed it. Deterministic: the
    same texts give the same list.
    """
    from tokenizers import Tokenizer
    from tokenizers.models import WordPiece
    from tokenizers.normalizers import BertNormalizer
    from tokenizers.pre_tokenizers import BertPreTokenizer
    from tokenizers.trainers import WordPieceTrainer

    if vocab_size < len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must be at least {len(SPECIAL_TOKENS)}, got {vocab_size}")
    normalizer = BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                strip_accents=bool(do_lower_case), lowercase=bool(do_lower_case))

    # Hugging Face's trainer is not deterministic by itself: it numbers the "##x"
    # continuation pieces in hash-map order, and those numbers break ties between
    # equally frequent merges (and it drops alphabet characters beyond limit_alphabet
    # with ties broken in hash-map order). So: one pass to count the characters of the
    # normalized text, choose the alphabet with a fixed tie-break, and give the trainer
    # the alphabet and every "##x" piece up front, in sorted order.
    if iter(texts_iterator) is texts_iterator:  # one-shot iterator: we need two passes
        texts_iterator = list(texts_iterator)
    char_counts: Counter = Counter()
    for text in _only_str(texts_iterator):
        char_counts.update(normalizer.normalize_str(text))
    for ch in [c for c in char_counts if c.isspace()]:
        del char_counts[ch]
    alphabet = sorted(char_counts, key=lambda c: (-char_counts[c], c))[:max(0, int(limit_alphabet))]
    alphabet.sort()
    # ASCII punctuation is always a word of its own: no "##" form. (Every other character
    # gets one, so that the trainer never has to create one in hash-map order.)
    continuations = ["##" + c for c in alphabet if not (33 <= ord(c) <= 126 and not c.isalnum())]

    tk = Tokenizer(WordPiece(unk_token="[UNK]"))
    tk.normalizer = normalizer
    tk.pre_tokenizer = BertPreTokenizer()
    trainer = WordPieceTrainer(vocab_size=int(vocab_size), min_frequency=int(min_frequency),
                               special_tokens=list(SPECIAL_TOKENS) + continuations,
                               limit_alphabet=len(alphabet), initial_alphabet=alphabet,
                               continuing_subword_prefix="##", show_progress=False)
    tk.train_from_iterator(_only_str(texts_iterator), trainer=trainer)
    vocab = tk.get_vocab(with_added_tokens=True)
    trained = [tok for tok, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    # Order as BERT vocabularies are: specials, characters, "##" characters, longer pieces.
    head = list(SPECIAL_TOKENS) + [c for c in alphabet if c in vocab] + continuations
    head_set = set(head)
    return head + [t for t in trained if t not in head_set]


def _only_str(texts: Iterable[str]) -> Iterator[str]:
    for t in texts:
        if not isinstance(t, str):
            raise TypeError(f"texts must be str, got {type(t).__name__}")
        if t:
            yield t


def write_vocab(tokens: Sequence[str], path) -> None:
    """Write tokens one per line (UTF-8, ``\\n`` line ends), as BERT's ``vocab.txt``."""
    seen = set()
    for i, tok in enumerate(tokens):
        if not tok or tok != tok.strip() or "\n" in tok or "\r" in tok:
            raise ValueError(f"token {i} ({tok!r}) cannot be written to a vocab.txt "
                             f"(empty, or surrounding/embedded whitespace)")
        if tok in seen:
            raise ValueError(f"duplicate token {tok!r} at index {i}")
        seen.add(tok)
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(tok + "\n" for tok in tokens))
    os.replace(tmp, path)


def read_metadata(metadata_files: Iterable[str], input_files_prefix: str = "") -> list[Path]:
    """Document paths listed in metadata files (one per line, blank lines ignored),
    relative to ``input_files_prefix`` (absolute paths are kept as they are)."""
    prefix = Path(input_files_prefix) if input_files_prefix else Path(".")
    paths: list[Path] = []
    for meta in metadata_files:
        with open(meta, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line:
                    paths.append(prefix / line)
    return paths


def iter_texts(paths: Iterable[Path], chunk_lines: int = 1000) -> Iterator[str]:
    """The files' text in chunks of up to ``chunk_lines`` lines (undecodable bytes replaced)."""
    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as f:
            buf: list[str] = []
            for line in f:
                buf.append(line)
                if len(buf) >= chunk_lines:
                    yield "".join(buf)
                    buf = []
            if buf:
                yield "".join(buf)


class _Texts:
    """Re-iterable texts of files (the trainer reads them twice, without holding them)."""

    def __init__(self, paths: Sequence[Path]):
        self.paths = list(paths)

    def __iter__(self) -> Iterator[str]:
        return iter_texts(self.paths)


def _split_commas(values: Sequence[str]) -> list[str]:
    return [v for item in values for v in item.split(",") if v]


def build_vocab_main(argv: Sequence[str] | None = None) -> int:
    """``bert-data build-vocab``: train a WordPiece vocab.txt from documents listed in metadata files."""
    ap = argparse.ArgumentParser(
        prog="bert-data build-vocab",
        description="Train a BERT WordPiece vocabulary (vocab.txt) from the documents listed "
                    "in metadata files. For fine-tuning or continued pretraining use your "
                    "model's own vocabulary instead.")
    ap.add_argument("--metadata_files", nargs="+", required=True,
                    help="metadata file(s), one document path per line (comma-separated also accepted)")
    ap.add_argument("--input_files_prefix", default="",
                    help="directory the paths in the metadata files are relative to")
    ap.add_argument("--vocab_size", type=int, default=30522, help="target size (default 30522)")
    ap.add_argument("--do_lower_case", action=argparse.BooleanOptionalAction, default=False,
                    help="lower-case and strip accents (uncased vocabulary); default: cased")
    ap.add_argument("--min_frequency", type=int, default=2)
    ap.add_argument("--limit_alphabet", type=int, default=1000)
    ap.add_argument("--out", required=True, help="output vocab.txt")
    args = ap.parse_args(argv)

    try:
        paths = read_metadata(_split_commas(args.metadata_files), args.input_files_prefix)
    except OSError as e:
        print(f"build-vocab: cannot read metadata file: {e}", file=sys.stderr)
        return 2
    missing = [p for p in paths if not p.is_file()]
    if missing:
        print(f"build-vocab: {len(missing)} listed document(s) not found, first: {missing[0]}",
              file=sys.stderr)
        return 2
    if not paths:
        print("build-vocab: the metadata files list no documents", file=sys.stderr)
        return 2
    try:
        tokens = train_wordpiece_vocab(_Texts(paths), vocab_size=args.vocab_size,
                                       do_lower_case=args.do_lower_case,
                                       min_frequency=args.min_frequency,
                                       limit_alphabet=args.limit_alphabet)
    except ValueError as e:
        print(f"build-vocab: {e}", file=sys.stderr)
        return 2
    write_vocab(tokens, args.out)
    note = ("" if len(tokens) >= args.vocab_size else
            f" (fewer than the requested {args.vocab_size}: the corpus supports no more pieces "
            f"with --min_frequency {args.min_frequency})")
    print(f"build-vocab: wrote {len(tokens)} tokens from {len(paths)} documents to {args.out}{note}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(build_vocab_main())
