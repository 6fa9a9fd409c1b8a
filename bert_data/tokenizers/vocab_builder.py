"""Train a vocabulary from raw text: BERT's WordPiece ``vocab.txt``, a Hugging Face
``tokenizer.json`` (WordPiece, byte-level BPE or Unigram) or a SentencePiece model (ALBERT's
kind), each ready for ``create_tfrecords`` (``--vocab_file``, ``--tokenizer_file``,
``--spm_model_file``) with the special tokens [PAD] [UNK] [CLS] [SEP] [MASK].

WordPiece ``vocab.txt``:

Uses Hugging Face ``tokenizers``' ``WordPieceTrainer`` behind the same normalizer and
pre-tokenizer as ``bert_data.tokenizers.wordpiece.WordPieceTokenizer`` (BERT's, from
``wordpiece.bert_hf_tokenizer``), so the resulting vocabulary fits that tokenizer. The
special tokens come first, in the order [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4).

The command ``bert-data build-vocab`` (``bert_data.cli.build_vocab``) reads the documents
through ``pipeline.documents``, as ``create_tfrecords`` does, and calls this module.

For real pretraining, use the vocabulary of the model you start from (e.g. BERT-Base
uncased); a vocabulary trained here only suits models trained from scratch.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from .vocab import SPECIAL_TOKENS
from .wordpiece import bert_hf_tokenizer

__all__ = ["train_wordpiece_vocab", "write_vocab", "train_hf_tokenizer", "write_tokenizer", "train_sentencepiece"]


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
    from tokenizers.models import WordPiece
    from tokenizers.trainers import WordPieceTrainer

    if vocab_size < len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must be at least {len(SPECIAL_TOKENS)}, got {vocab_size}")
    tk = bert_hf_tokenizer(WordPiece(unk_token="[UNK]"), do_lower_case)
    normalizer = tk.normalizer

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


# --------------------------------------------------------------------------- tokenizer.json

def train_hf_tokenizer(texts: Iterable[str], model: str = "bpe", vocab_size: int = 30522,
                       do_lower_case: bool = True, min_frequency: int = 2, limit_alphabet: int = 1000):
    """A Hugging Face ``Tokenizer`` (save it with ``.save(path)``) trained on ``texts``:

    * ``wordpiece``: the vocabulary of :func:`train_wordpiece_vocab` behind BERT's normaliser and
      pre-tokenizer (what ``BertWordPieceTokenizer`` saves; words up to Google's 200 characters);
    * ``bpe``: byte-level BPE (GPT-2/RoBERTa style: no unknown pieces; a space before every word
      is part of its first piece, "Ġword"), lower-cased and accents stripped with ``do_lower_case``;
    * ``unigram``: SentencePiece-style Unigram ("▁word" pieces; NFKC, lower-cased with
      ``do_lower_case``).

    [PAD] [UNK] [CLS] [SEP] [MASK] are ids 0-4, and the post-processor adds [CLS]/[SEP] as BERT.
    Deterministic: the same texts give the same file (checked across processes by the tests;
    for Unigram, up to a score on a rounding boundary: see ``_settled_unigram``).
    """
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE, Unigram, WordPiece
    from tokenizers.trainers import BpeTrainer, UnigramTrainer

    if model not in ("wordpiece", "bpe", "unigram"):
        raise ValueError(f"model must be wordpiece, bpe or unigram, got {model!r}")
    if vocab_size < len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must be at least {len(SPECIAL_TOKENS)}, got {vocab_size}")
    if iter(texts) is texts:
        texts = list(texts)
    if model == "wordpiece":
        from .wordpiece import GOOGLE_MAX_INPUT_CHARS_PER_WORD

        tokens = train_wordpiece_vocab(texts, vocab_size, do_lower_case, min_frequency, limit_alphabet)
        tk = bert_hf_tokenizer(WordPiece(vocab={t: i for i, t in enumerate(tokens)}, unk_token="[UNK]",
                                         max_input_chars_per_word=GOOGLE_MAX_INPUT_CHARS_PER_WORD), do_lower_case)
        tk.add_special_tokens(list(SPECIAL_TOKENS))
        tk.decoder = decoders.WordPiece()
    else:
        from tokenizers import Regex

        # White space runs (line breaks too) become one space: a piece never holds a line break.
        steps = [normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip()]
        steps += [normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()] if do_lower_case else []
        if model == "bpe":
            tk = Tokenizer(BPE())
            tk.normalizer = normalizers.Sequence(steps if do_lower_case else steps + [normalizers.NFC()])
            # add_prefix_space: every word, the first of a text too, starts with "Ġ", so that
            # whole-word masking can tell where words start.
            tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
            tk.decoder = decoders.ByteLevel()
            trainer = BpeTrainer(vocab_size=int(vocab_size), min_frequency=int(min_frequency),
                                 special_tokens=list(SPECIAL_TOKENS), show_progress=False,
                                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        else:
            tk = Tokenizer(Unigram())
            tk.normalizer = normalizers.Sequence([normalizers.NFKC()] + steps)
            tk.pre_tokenizer = pre_tokenizers.Metaspace()
            tk.decoder = decoders.Metaspace()
            trainer = UnigramTrainer(vocab_size=int(vocab_size), special_tokens=list(SPECIAL_TOKENS),
                                     unk_token="[UNK]", show_progress=False)
        tk.train_from_iterator(_only_str(texts), trainer=trainer)
        if model == "unigram":
            tk = _settled_unigram(tk)
    cls_id, sep_id = tk.token_to_id("[CLS]"), tk.token_to_id("[SEP]")
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    return tk


def write_tokenizer(tokenizer, path) -> None:
    """Save a Hugging Face tokenizer as ``path`` (a tokenizer.json), atomically."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tokenizer.save(str(tmp))
    os.replace(tmp, path)


def _settled_unigram(tk):
    """Hugging Face's Unigram trainer is not deterministic by itself: it sums scores in hash-map
    order (two runs differ in the last digits, and the pieces' order follows), and it adds the
    characters its pieces lack with the scores ``min + k * 0.0001`` in hash-map order.  Rounded to
    10 digits, those characters given their scores in character order (which may move a trained
    single character at the lowest score up by a few 0.0001), and the pieces ordered by
    (score, piece) after the special tokens, the file is the same from run to run (unless a score
    falls on a rounding boundary)."""
    import json

    from tokenizers import Tokenizer

    data = json.loads(tk.to_str())
    model = data["model"]
    head, rest = model["vocab"][: len(SPECIAL_TOKENS)], model["vocab"][len(SPECIAL_TOKENS):]
    rest = [[piece, round(score, 10)] for piece, score in rest]
    if rest:
        lowest = min(score for _, score in rest)
        # The added characters: the single characters at lowest + k * 0.0001 for k = 0, 1, ...
        # while the scores follow.  Step 0 may hold two: the first added character takes exactly
        # the lowest trained score, and that piece may be a single character too (which of the
        # two comes first is hash-map order again).  The multiset of steps is the same in every
        # run, so the block's sorted characters take the sorted scores.
        by_step = {}
        for entry in rest:
            steps = (entry[1] - lowest) / 1e-4
            if len(entry[0]) == 1 and abs(steps - round(steps)) < 1e-5:
                by_step.setdefault(round(steps), []).append(entry)
        block, k = [], 0
        while k in by_step:
            block += [(k, entry) for entry in by_step[k]]
            k += 1
        pieces = sorted(entry[0] for _, entry in block)
        for piece, (step, entry) in zip(pieces, block):  # block is in step order
            entry[0], entry[1] = piece, round(lowest + step * 1e-4, 10)
    rest.sort(key=lambda entry: (-entry[1], entry[0]))
    model["vocab"] = head + rest
    model["unk_id"] = [piece for piece, _ in model["vocab"]].index("[UNK]")
    return Tokenizer.from_str(json.dumps(data))


# --------------------------------------------------------------------------- SentencePiece

# SentencePiece skips training sentences longer than max_sentence_length bytes: longer lines are
# cut at spaces into parts of at most this many characters (a UTF-8 character is up to 4 bytes).
SPM_LINE_CHARS = 4000


def _spm_lines(texts: Iterable[str], do_lower_case: bool) -> Iterator[str]:
    """Training lines as the tokenizer will see its text: ALBERT's preprocess_text per line."""
    from .sentencepiece import preprocess_text

    for text in _only_str(texts):
        for line in text.split("\n"):
            line = preprocess_text(line, do_lower_case)
            while len(line) > SPM_LINE_CHARS:
                cut = line.rfind(" ", 0, SPM_LINE_CHARS)
                cut = cut if cut > 0 else SPM_LINE_CHARS
                yield line[:cut]
                line = line[cut:].lstrip()
            if line:
                yield line


def train_sentencepiece(texts: Iterable[str], model_path, vocab_size: int = 30000, do_lower_case: bool = True,
                        model_type: str = "unigram", character_coverage: float = 0.9995) -> int:
    """Train a SentencePiece model as ALBERT's was made (<pad> 0, <unk> 1, control symbols
    [CLS] [SEP] [MASK] 2-4, no <s> </s>) on the lines of ``texts`` (each through ALBERT's
    ``preprocess_text``, lower-cased with ``do_lower_case``); writes ``model_path`` (``.model``)
    and the ``.vocab`` beside it.  Returns the number of pieces.  One trainer thread and a fixed
    random seed, so that the same texts give the same model (SentencePiece's multi-threaded EM
    may not); the model records its trainer options, the output name among them, so the bytes
    are the same for the same name.  The trainer holds every line in memory."""
    try:
        import sentencepiece
    except ImportError:
        raise ValueError("training a SentencePiece model needs the sentencepiece package: "
                         "pip install sentencepiece (or 'bert_data[sentencepiece]')") from None
    model_path = Path(model_path)
    if model_path.suffix != ".model":
        raise ValueError(f"{model_path}: a SentencePiece model's name must end in .model (the .vocab goes beside it)")
    if model_path.parent and not model_path.parent.exists():
        model_path.parent.mkdir(parents=True, exist_ok=True)
    prefix = str(model_path.with_suffix(""))
    sentencepiece.set_random_generator_seed(0)
    try:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=_spm_lines(texts, do_lower_case), model_prefix=prefix, vocab_size=int(vocab_size),
            model_type=model_type, character_coverage=float(character_coverage), pad_id=0, unk_id=1, bos_id=-1,
            eos_id=-1, control_symbols="[CLS],[SEP],[MASK]", num_threads=1, minloglevel=2,
            max_sentence_length=4 * SPM_LINE_CHARS + 16)
    except RuntimeError as error:  # e.g. "Vocabulary size too high (30000). Please set it to a value <= 813."
        message = str(error).strip().splitlines()[-1] if str(error).strip() else "training failed"
        raise ValueError(f"SentencePiece: {message.split('] ')[-1]}") from None
    processor = sentencepiece.SentencePieceProcessor(model_file=str(model_path))
    return processor.GetPieceSize()
