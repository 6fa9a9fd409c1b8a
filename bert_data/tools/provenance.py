"""Where a record came from (``--record_provenance``): its ``source_index`` and
``document_index`` named (the source's name, the document's file), and the document itself,
found again from the inputs the manifest records.

The document is found as the run found it: the source's inputs listed (its metadata files, then
its input files; then its validation files), the files planned into documents in listed order,
and the document at ``document_index`` read.  Relative paths are as the run was given them:
``inspect`` must run where the run did (or the paths be absolute or URLs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..config import separator_line_of
from ..pipeline.documents import planner
from ..pipeline.documents.reading import read_documents
from ..pipeline.documents.types import InputSpec, ReadingSpec
from ..run.planning import list_inputs


@dataclass
class Origin:
    source_index: int
    document_index: int
    source: Optional[str] = None  # the source's name (--sources), else None

    def describe(self) -> str:
        named = f" ({self.source})" if self.source else ""
        return f"source {self.source_index}{named}, document {self.document_index}"


@dataclass
class FoundDocument:
    label: str  # the file (and "#k" for the k-th document of a file of many)
    text: str


def origin_of(features: dict, manifest=None) -> Optional[Origin]:
    """The record's origin from its features (stored names), or None without provenance."""
    if "source_index" not in features or "document_index" not in features:
        return None
    origin = Origin(int(features["source_index"][0]), int(features["document_index"][0]))
    sources = (manifest.options.get("sources") or {}).get("source") if manifest is not None else None
    if sources and 0 <= origin.source_index < len(sources):
        origin.source = sources[origin.source_index]["name"]
    return origin


def source_inputs(manifest, source_index: int) -> InputSpec:
    """The inputs of one source as the manifest records them (without --sources: the run's)."""
    options = manifest.options
    separator = separator_line_of(options.get("multiple_docs_separator") or "\n")
    multiple = bool(options.get("multiple_docs_in_single_file"))
    sources = (options.get("sources") or {}).get("source")
    if sources:
        if not 0 <= source_index < len(sources):
            raise ValueError(f"source_index {source_index}: the manifest lists {len(sources)} sources")
        source = sources[source_index]
        reading = ReadingSpec(multiple, separator, source.get("text_field", options.get("text_field")),
                              options.get("input_encoding") or "utf-8")
        return InputSpec(tuple(source["metadata_files"]), tuple(source["input_files"]), source["input_files_prefix"],
                         tuple(source["val_metadata_files"]), source.get("val_fraction", options.get("val_fraction") or 0),
                         source.get("val_seed", options.get("val_seed") or 0), reading)
    if source_index != 0:
        raise ValueError(f"source_index {source_index}: the run had no --sources (one source, index 0)")
    reading = ReadingSpec(multiple, separator, options.get("text_field"), options.get("input_encoding") or "utf-8")
    return InputSpec(tuple(options.get("metadata_files") or ()), tuple(options.get("input_files") or ()),
                     options.get("input_files_prefix") or "", tuple(options.get("val_metadata_files") or ()),
                     options.get("val_fraction") or 0.0, options.get("val_seed") or 0, reading)


def find_document(manifest, origin: Origin) -> FoundDocument:
    """The document a record came from, read again from its source's inputs."""
    inputs = source_inputs(manifest, origin.source_index)
    entries, val_entries, _, _, split_code = list_inputs(inputs, True, True, True)
    reading = inputs.reading
    corpus = planner.plan_corpus(entries, split_code, val_entries,
                                 multiple_docs_in_single_file=reading.multiple_docs_in_single_file,
                                 separator_line=reading.separator_line, text_field=reading.text_field,
                                 encoding=reading.encoding)
    position = origin.document_index
    if not 0 <= position < corpus.n_docs:
        raise ValueError(f"document {position} of source {origin.source_index}: its inputs list {corpus.n_docs} "
                         "documents now (run inspect where the run ran, with the same input files)")
    label, parts = None, []
    for slice_ in corpus.slices:
        if slice_.first_doc > position:
            break
        wanted = [source for source in slice_.sources if source.corpus_doc <= position]
        for document in read_documents(wanted, reading.separator_line, reading.multiple_docs_in_single_file, []):
            if document.corpus_doc == position:
                label = document.label if label is None else label
                parts.append(document.text)
    if label is None:
        raise ValueError(f"document {position} of source {origin.source_index} holds no text now")
    return FoundDocument(label, "".join(parts))
