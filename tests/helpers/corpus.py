"""Synthetic corpora whose expected WordPiece tokens are known without running our code.

Every document draws its words from its own set of four-letter stems, so any run of tokens in
an output record names the document it came from.  Some words carry a suffix that is not a
stem of its own, so the tokenizer splits them into ``stem ##suffix``, which exercises whole-word
masking.  Sentences end with a period and are laid out in paragraphs with line breaks inside,
so the spaCy sentencizer path is exercised too.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

SPECIALS = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PUNCTUATION = [".", ","]
SUFFIXES = ["ing", "ed", "s"]
CONSONANTS = "bdfgklmnprstvz"
VOWELS = "aeiou"


def all_stems() -> List[str]:
    syllables = [c + v for c in CONSONANTS for v in VOWELS]
    return [a + b for a in syllables for b in syllables]


@dataclass
class SyntheticCorpus:
    root: Path
    metadata: Path
    vocab: Path
    # label -> sentences -> expected tokens (lower-case WordPiece strings)
    documents: Dict[str, List[List[str]]] = field(default_factory=dict)
    stem_owner: Dict[str, str] = field(default_factory=dict)

    def document_of(self, tokens: List[str]) -> set:
        return {self.stem_owner[t] for t in tokens if t in self.stem_owner}


def write_vocab(path: Path, stems: List[str]) -> None:
    tokens = SPECIALS + PUNCTUATION + stems + ["##" + s for s in SUFFIXES]
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")


def make_corpus(root: Path, n_docs: int = 60, seed: int = 0, min_sentences: int = 15, max_sentences: int = 50,
                words_per_doc: int = 40) -> SyntheticCorpus:
    rng = random.Random(seed)
    stems = all_stems()
    rng.shuffle(stems)
    root.mkdir(parents=True, exist_ok=True)
    (root / "docs").mkdir(exist_ok=True)
    corpus = SyntheticCorpus(root, root / "metadata.txt", root / "vocab.txt")
    write_vocab(corpus.vocab, stems[: n_docs * words_per_doc])
    labels = []
    for index in range(n_docs):
        own = stems[index * words_per_doc : (index + 1) * words_per_doc]
        label = f"docs/doc{index:03d}.txt"
        sentences, paragraphs, paragraph = [], [], []
        for _ in range(rng.randint(min_sentences, max_sentences)):
            words, tokens = [], []
            for _ in range(rng.randint(3, 14)):
                stem = rng.choice(own)
                if rng.random() < 0.2:
                    suffix = rng.choice(SUFFIXES)
                    words.append(stem + suffix)
                    tokens += [stem, "##" + suffix]
                else:
                    words.append(stem)
                    tokens.append(stem)
            words[0] = words[0].capitalize()
            sentences.append(tokens + ["."])
            paragraph.append(" ".join(words) + ".")
            if rng.random() < 0.2:
                paragraphs.append(paragraph)
                paragraph = []
        paragraphs.append(paragraph)
        # Line breaks inside paragraphs are white space; blank lines separate paragraphs.
        text = "\n\n".join("\n".join(p) for p in paragraphs if p) + "\n"
        (root / label).write_text(text, encoding="utf-8")
        corpus.documents[label] = sentences
        for stem in own:
            corpus.stem_owner[stem] = label
        labels.append(label)
    corpus.metadata.write_text("\n".join(labels) + "\n", encoding="utf-8")
    return corpus


def file_hashes(directory: Path) -> Dict[str, str]:
    return {
        path.relative_to(directory).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*.tfrecords"))
    }


def corpus_config(corpus: SyntheticCorpus, output_dir, **overrides):
    """A GeneratorConfig for a synthetic corpus: small sequences, one worker, quick."""
    from bert_data.config import GeneratorConfig

    options = dict(metadata_files=[str(corpus.metadata)], input_files_prefix=str(corpus.root),
                   vocab_file=str(corpus.vocab), do_lower_case=True, max_seq_length=64, max_predictions_per_seq=10,
                   dupe_factor=2, output_dir=str(output_dir), num_workers=1, num_output_files=3)
    options.update(overrides)
    return GeneratorConfig(**options)
