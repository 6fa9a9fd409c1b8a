"""Reading documents, whatever their kind: the sources of slices turned into documents
(``read_documents``: the generator's tasks), and every listed document's text
(``DocumentTexts``: ``bert-data build-vocab``), read exactly as the generator reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, List, Optional, Sequence, Union

from . import planner
from .listing import list_documents
from .spans import separator_pattern
from .tables import table_documents
from .text_files import text_documents
from ...format.dataset_layout import TRAIN_CODE
from .types import AUTO, UTF8, Document, DocumentColumns, Skip, Source


def read_documents(sources: Sequence[Source], separator_line: Optional[str], multiple_docs_in_single_file: bool,
                   skips: List[Skip], columns: bool = False) -> Iterator[Union[Document, DocumentColumns]]:
    """The documents of some sources, in order.  Empty and binary ones (and, in JSON Lines, lines
    without a text) are recorded in ``skips``.  A source's ``text_field`` marks JSON Lines, its
    ``table`` a table file.  ``columns``: blocks of JSON Lines documents may come as
    ``DocumentColumns`` (see ``text_files.text_documents``)."""
    pattern = separator_pattern(separator_line) if multiple_docs_in_single_file else None
    for source in sources:
        if source.table:
            yield from table_documents(source, skips)
        else:
            yield from text_documents(source, pattern, skips, columns)


@dataclass
class Undecoded:
    """The documents read that held bytes not in their encoding (UTF-8 unless ``--input_encoding``),
    each replaced by U+FFFD: how many, how many bytes, and where the first is (``"a.txt line 3"``,
    ``"b.txt#4, line 2 of that document"``).  A document read in parts counts once (``parts``: the
    corpus positions of those counted)."""

    n_docs: int = 0
    n_bytes: int = 0
    first: str = ""
    parts: List[int] = field(default_factory=list)

    def counted(self, documents: Iterable[Union[Document, DocumentColumns]]
                ) -> Iterator[Union[Document, DocumentColumns]]:
        """``documents``, counted as they go by (``DocumentColumns`` hold no byte replaced)."""
        for document in documents:
            if type(document) is not DocumentColumns and document.n_replaced:
                self.add(document)
            yield document

    def add(self, document: Document) -> None:
        self.n_bytes += document.n_replaced
        if document.in_parts:
            if document.corpus_doc in self.parts:
                return
            self.parts.append(document.corpus_doc)
        self.n_docs += 1
        if not self.first:
            if "#" in document.label:
                self.first = f"{document.label}, line {document.bad_line} of that document"
            elif document.continues:
                self.first = f"{document.label} (in a later part of it)"
            else:
                self.first = f"{document.label} line {document.bad_line}"

    def merge(self, other: "Undecoded") -> None:
        """Add another slice's (slices merged in corpus order)."""
        self.n_bytes += other.n_bytes
        self.n_docs += other.n_docs - len(set(self.parts) & set(other.parts))
        self.parts = sorted(set(self.parts) | set(other.parts))
        self.first = self.first or other.first

    def describe(self, encoding: str) -> str:
        """One line for the console ("" when every byte was read)."""
        if not self.n_docs:
            return ""
        what = "UTF-8" if encoding in ("", UTF8) else ("in the encoding detected" if encoding == AUTO else encoding)
        docs = "1 document holds" if self.n_docs == 1 else f"{self.n_docs:,} documents hold"
        fix = ("give the input's encoding with --input_encoding (e.g. latin-1, cp1252) or --input_encoding auto"
               if encoding in ("", UTF8) else "check --input_encoding")
        return (f"{docs} {self.n_bytes:,} byte{'s' if self.n_bytes != 1 else ''} that are not {what}, replaced by "
                f"U+FFFD (the tokenizer drops it): text is lost; first in {self.first}; {fix}")


class DocumentTexts:
    """The text of every document the metadata files (and ``input_files``) list, read as the
    generator reads it (compressed files, many documents a file, JSON Lines, large documents in
    parts); empty and binary documents, and JSON lines without a text, are skipped.  Planned
    once, iterable any number of times (``bert-data build-vocab`` reads the texts twice).

    ``missing``: the (entry, reason) skipped with ``skip_missing``.  After a full pass:
    ``n_docs``, the documents read, and ``skipped``, reason -> documents skipped.
    """

    def __init__(self, metadata_files: Sequence[str], input_files_prefix: str = "",
                 multiple_docs_in_single_file: bool = False, separator_line: Optional[str] = None,
                 text_field: Optional[str] = None, skip_missing: bool = False,
                 input_files: Sequence[str] = (), allow_outside_prefix: bool = False, encoding: str = UTF8,
                 read_path_lists_as_text: bool = False):
        entries, self.missing = list_documents(metadata_files, input_files, input_files_prefix, skip_missing,
                                               allow_outside_prefix, read_path_lists_as_text)
        # Slices group the generator's work; here only their sources, in order, matter.
        plan = planner.plan_corpus(entries, lambda label, position: TRAIN_CODE,
                                   multiple_docs_in_single_file=multiple_docs_in_single_file,
                                   separator_line=separator_line, text_field=text_field, encoding=encoding)
        self.sources = [source for slice_ in plan.slices for source in slice_.sources]
        self.n_listed = plan.n_docs  # documents found, before any is skipped
        self.separator_line = separator_line
        self.multiple_docs_in_single_file = multiple_docs_in_single_file
        self.n_docs = 0
        self.skipped: dict = {}
        self.encoding = encoding
        self.undecoded = Undecoded()  # after a full pass: documents with bytes not in their encoding

    def __iter__(self) -> Iterator[str]:
        skips: List[Skip] = []
        read = set()
        self.undecoded = Undecoded()
        for document in self.undecoded.counted(read_documents(self.sources, self.separator_line,
                                                              self.multiple_docs_in_single_file, skips)):
            read.add(document.label)
            yield document.text
        self.n_docs = len(read)
        skipped = {}
        for skip in skips:
            if skip.label not in read:  # not a blank part of a document that has text
                skipped.setdefault(skip.reason, set()).add(skip.label)
        self.skipped = {reason: len(labels) for reason, labels in sorted(skipped.items())}
