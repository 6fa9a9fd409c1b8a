"""Reading documents, whatever their kind: the sources of slices turned into documents
(``read_documents``: the generator's tasks), and every listed document's text
(``DocumentTexts``: ``bert-data build-vocab``), read exactly as the generator reads them.
"""

from __future__ import annotations

from typing import Iterator, List, Optional, Sequence

from . import planner
from .listing import list_documents
from .spans import separator_pattern
from .tables import table_documents
from .text_files import text_documents
from ...format.dataset_layout import TRAIN_CODE
from .types import Document, Skip, Source


def read_documents(sources: Sequence[Source], separator_line: Optional[str], multiple_docs_in_single_file: bool,
                   skips: List[Skip]) -> Iterator[Document]:
    """The documents of some sources, in order.  Empty and binary ones (and, in JSON Lines, lines
    without a text) are recorded in ``skips``.  A source's ``text_field`` marks JSON Lines, its
    ``table`` a table file."""
    pattern = separator_pattern(separator_line) if multiple_docs_in_single_file else None
    for source in sources:
        if source.table:
            yield from table_documents(source, skips)
        else:
            yield from text_documents(source, pattern, skips)


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
                 input_files: Sequence[str] = (), allow_outside_prefix: bool = False):
        entries, self.missing = list_documents(metadata_files, input_files, input_files_prefix, skip_missing,
                                               allow_outside_prefix)
        # Slices group the generator's work; here only their sources, in order, matter.
        plan = planner.plan_corpus(entries, lambda label, position: TRAIN_CODE,
                                   multiple_docs_in_single_file=multiple_docs_in_single_file,
                                   separator_line=separator_line, text_field=text_field)
        self.sources = [source for slice_ in plan.slices for source in slice_.sources]
        self.n_listed = plan.n_docs  # documents found, before any is skipped
        self.separator_line = separator_line
        self.multiple_docs_in_single_file = multiple_docs_in_single_file
        self.n_docs = 0
        self.skipped: dict = {}

    def __iter__(self) -> Iterator[str]:
        skips: List[Skip] = []
        read = set()
        for document in read_documents(self.sources, self.separator_line, self.multiple_docs_in_single_file, skips):
            read.add(document.label)
            yield document.text
        self.n_docs = len(read)
        skipped = {}
        for skip in skips:
            if skip.label not in read:  # not a blank part of a document that has text
                skipped.setdefault(skip.reason, set()).add(skip.label)
        self.skipped = {reason: len(labels) for reason, labels in sorted(skipped.items())}
