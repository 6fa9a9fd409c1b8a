"""The words of the input side, at the bottom of the package (they import nothing of it): an
entry of a metadata file, a *source* (a byte or row range of one input file), a *slice*
(neighbouring documents read and tokenized together), the corpus plan, a document read, a
document skipped and why, and the one exception bad input raises.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import repeat
from typing import Dict, List, Optional, Tuple

import numpy as np

from ... import storage

DEFAULT_TEXT_FIELD = "text"  # the text's key in JSON Lines and column in tables, unless --text_field
UTF8 = "utf-8"  # the default encoding of text files, and the fast path
AUTO = "auto"  # --input_encoding auto: detected per file (charset-normalizer)


@dataclass(frozen=True)
class ReadingSpec:
    """How the input files hold documents: one a file, or many (``multiple_docs_in_single_file``)
    separated by a line holding ``separator_line`` (None: a blank line); JSON Lines' key and
    tables' column ``text_field`` (None: ``DEFAULT_TEXT_FIELD``; given, every file that is not a
    table is read as JSON Lines); text files in ``encoding`` (a Python codec's name, ``UTF8`` by
    default, or ``AUTO``: detected per file)."""

    multiple_docs_in_single_file: bool
    separator_line: Optional[str]
    text_field: Optional[str]
    encoding: str


@dataclass(frozen=True)
class InputSpec:
    """Which documents a run reads and how: metadata files (entries relative to ``prefix``) and
    ``input_files`` paths or globs; validation documents listed (``val_metadata_files``) or drawn
    by hash (``val_fraction``, keyed on ``val_seed``); read as ``reading`` says."""

    metadata_files: Tuple[str, ...]
    input_files: Tuple[str, ...]
    prefix: str
    val_metadata_files: Tuple[str, ...]
    val_fraction: float
    val_seed: int
    reading: ReadingSpec

    @property
    def named_files(self) -> List[str]:
        """Every file the user named as input (for messages, and never to be overwritten)."""
        return list(self.metadata_files) + list(self.input_files) + list(self.val_metadata_files)


class InputError(ValueError):
    """Bad input found while planning or reading; the message is one line naming the file
    (credentials in URLs redacted)."""

    def __init__(self, message: str):
        super().__init__(storage.redact(message))


def one_line(error: BaseException) -> str:
    """An exception's message on one line (library messages may span several)."""
    return " ".join(str(error).split()) or type(error).__name__


@dataclass
class MetadataEntry:
    """One document file as listed: where (metadata file and line) and as what."""

    metadata_file: str
    line_number: int
    label: str  # as listed: names the document in messages and in the validation hash
    path: str  # as opened (prefix joined; absolute, or a URL)
    size: int = -1  # bytes, when known from listing a URL's folder (saves a request a file) or a local stat
    version: str = ""  # an object's ETag (or other version), when its listing gave one
    modified_ns: int = -1  # a local file's modification time, from the stat that checked it


@dataclass(frozen=True)
class Source:
    """A byte range of one input file: whole documents, or one part of a large document.

    For a compressed file (``codec`` set) the offsets are in the decompressed stream."""

    path: str  # as opened (prefix joined)
    label: str  # as listed in the metadata file: names the document in messages and hashes
    start: int
    end: int  # exclusive; -1 means end of file
    first_doc: int = 0  # index in the file of the first document of the range
    continues: bool = False  # a later part of the document the previous source began
    # "" (plain), "gz", "bz2", "xz" or "zst": how the file is compressed (from its name, else its
    # first bytes); "+ENCODING" after it: the file's text is in an encoding that is not ASCII's
    # superset (UTF-16, UTF-32...), read transcoded to UTF-8 (offsets in the UTF-8 stream).
    codec: str = ""
    encoding: str = ""  # the text's encoding when ASCII's superset and not UTF-8 (latin-1, cp1252...)
    text_field: Optional[str] = None  # JSON Lines (a text file): one document a line, its text at this key
    corpus_doc: int = 0  # position in the listed corpus of the range's first document
    in_parts: bool = False  # one part of a document read in parts (see text_files.document_parts)
    # A table file ("parquet", "arrow_file", "arrow_stream"): start and end are rows, one document
    # a row, its text in the column ``text_field``; ``stamp`` the file's identity when planned
    # (a worker's open reader of an older file of the same name is not reused).
    table: str = ""
    stamp: str = ""


@dataclass
class Slice:
    """Neighbouring documents of the listed corpus, read, split into sentences and tokenized
    together: the grain of the first phase of work.  Small, so every core stays busy even when
    documents are few and large (a large document is read in parts, a slice each).

    ``first_doc`` is the corpus position of the first document that starts or continues here;
    ``n_docs`` counts the documents that start here (listed, before any are skipped).
    """

    index: int
    first_doc: int
    sources: List[Source] = field(default_factory=list)
    n_docs: int = 0
    n_bytes: int = 0

    @property
    def starts_with_a_part(self) -> bool:
        """It begins with a later part of a document that began in an earlier slice."""
        return bool(self.sources) and self.sources[0].continues


@dataclass
class CorpusPlan:
    """The listed corpus: its slices, in order, and the split of each document, by position
    (``doc_splits[g]`` is ``dataset_layout.TRAIN_CODE`` or ``VAL_CODE`` for the document at
    position ``g``)."""

    slices: List[Slice]
    doc_splits: np.ndarray  # uint8, one per document
    docs_per_path: Dict[str, int] = field(default_factory=dict)  # input file -> documents planned

    @property
    def n_docs(self) -> int:
        return len(self.doc_splits)

    @property
    def n_bytes(self) -> int:
        return sum(slice_.n_bytes for slice_ in self.slices)


@dataclass
class Document:
    label: str  # "path" or "path#3" for the fourth document of a multi-document file
    text: str
    n_replaced: int = 0  # bytes that were not UTF-8 (or not the file's encoding), replaced by U+FFFD
    bad_line: int = 0  # the line of the document (from 1) where the first such byte is, if any
    continues: bool = False  # a later part of a large document (see text_files.document_parts)
    corpus_doc: int = 0  # position in the listed corpus
    in_parts: bool = False  # one part of a document read in parts


@dataclass
class DocumentColumns:
    """Whole documents read as columns, not a ``Document`` each (a block of JSON Lines of the
    common shape: thousands a slice of short documents): their texts, and their corpus
    positions, consecutive from ``corpus_doc``; document ``i`` is the file's number ``first + i``,
    labelled ``label#(first + i)`` (``label``: the source's).  None is read in parts, none holds a
    byte replaced; a reader gives them only to a caller that asks for them."""

    texts: List[str]
    label: str
    first: int
    corpus_doc: int

    def __len__(self) -> int:
        return len(self.texts)

    def document(self, index: int) -> Document:
        """The ``index``-th document, as a ``Document`` (for a message naming it)."""
        return Document(f"{self.label}#{self.first + index}", self.texts[index], corpus_doc=self.corpus_doc + index)

    def documents(self) -> List[Document]:
        """The same documents, a ``Document`` each (for a caller that reads them one by one)."""
        n, first, label = len(self.texts), self.first, f"{self.label}#"
        return list(map(Document, [f"{label}{index}" for index in range(first, first + n)], self.texts,
                        repeat(0, n), repeat(0, n), repeat(False, n), range(self.corpus_doc, self.corpus_doc + n)))


@dataclass
class Skip:
    reason: str
    label: str
    corpus_doc: int = 0
    in_parts: bool = False


# Why a document is skipped (counted, never an error).
BINARY = "binary file (NUL bytes)"
# A URL's compression is told by its name only (sniffing would cost a request a file while planning).
COMPRESSED_UNNAMED = "compressed file whose name does not say so (name it .gz, .bz2, .xz or .zst)"
EMPTY = "empty or white-space only"
NO_SENTENCE = "no sentence with any token"
# JSON Lines and tables: a line or row that holds no document text.
INVALID_JSON = "invalid JSON line"
NOT_OBJECT = "JSON line is not an object"
MISSING_KEY = "missing text key"
NOT_STRING = "text value is not a string"
NULL_TEXT = "text value is null"


def decode_text(data: bytes, encoding: str = "") -> Tuple[str, int, int]:
    """UTF-8 (or ``encoding``) with replacement; returns the text, how many replacements it took
    and the line (from 1) of the first byte replaced (0 if none).  Valid text is decoded once."""
    try:
        return data.decode(encoding or UTF8), 0, 0
    except UnicodeDecodeError as error:
        text = data.decode(encoding or UTF8, errors="replace")
        genuine = data.decode(encoding, errors="ignore").count("\ufffd") if encoding else \
            data.count("\ufffd".encode(UTF8))
        return text, text.count("\ufffd") - genuine, data.count(b"\n", 0, error.start) + 1
