"""Documents as the planner finds them and the reader reads them (pipeline/documents/): metadata
files, documents of many a file, parts of large files, validation by hash, skipped documents."""

import os

import pytest

from bert_data.pipeline.documents.listing import check_documents_exist, read_metadata
from bert_data.pipeline.documents.planner import is_validation_document
from bert_data.pipeline.documents.reading import read_documents
from bert_data.pipeline.documents.text_files import document_parts
from bert_data.format.dataset_layout import TRAIN_CODE
from bert_data.pipeline.documents.types import BINARY, CorpusPlan, EMPTY, InputError

from tests.helpers.planning import plan, sources


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def texts(group, separator_line=None, multi=False):
    """The texts of a corpus, a slice or a list of sources."""
    group = sources(group) if isinstance(group, CorpusPlan) else getattr(group, "sources", group)
    skips = []
    found = [doc.text for doc in read_documents(group, separator_line, multi, skips)]
    return found, skips


def test_metadata_ignores_blank_lines_and_spaces_and_concatenates(tmp_path):
    m1 = write(tmp_path / "m1.txt", "  a.txt \n\n b.txt\n")
    m2 = write(tmp_path / "m2.txt", "c.txt")
    entries = read_metadata([str(m1), str(m2)], "prefix")
    assert [e.label for e in entries] == ["a.txt", "b.txt", "c.txt"]
    assert entries[1].path == os.path.abspath(os.path.join("prefix", "b.txt")) and entries[1].line_number == 3


def test_empty_metadata_file_is_an_error(tmp_path):
    m = write(tmp_path / "m.txt", "\n  \n")
    with pytest.raises(InputError, match="m.txt: metadata file lists no documents"):
        read_metadata([str(m)], "")


def test_missing_document_names_metadata_file_and_line(tmp_path):
    write(tmp_path / "a.txt", "x")
    m = write(tmp_path / "m.txt", "a.txt\nmissing.txt\n")
    entries = read_metadata([str(m)], str(tmp_path))
    with pytest.raises(InputError, match=r"m.txt:2: file not found: .*missing.txt"):
        check_documents_exist(entries)
    usable, missing = check_documents_exist(entries, skip_missing=True)
    assert [e.label for e in usable] == ["a.txt"] and missing[0][1] == "file not found"


def test_one_document_per_file_numbered_in_listed_order(tmp_path):
    for i in range(7):
        write(tmp_path / f"{i}.txt", f"doc {i}")
    entries = read_metadata([str(write(tmp_path / "m.txt", "\n".join(f"{i}.txt" for i in range(7))))], str(tmp_path))
    corpus = plan(entries)
    assert corpus.n_docs == 7 and corpus.doc_splits.tolist() == [TRAIN_CODE] * 7
    assert [s.corpus_doc for s in sources(corpus)] == list(range(7))
    assert [s.first_doc for s in corpus.slices] == [0] and corpus.slices[0].n_docs == 7
    docs = list(read_documents(sources(corpus), None, False, []))
    assert [(doc.text, doc.corpus_doc) for doc in docs][6] == ("doc 6", 6)


def test_blank_lines_separate_documents_google_format(tmp_path):
    body = "s1 a\ns2 a\n\n\ns1 b\n  \t\ns1 c\ns2 c\n\n"
    path = write(tmp_path / "f.txt", body)
    entries = read_metadata([str(write(tmp_path / "m.txt", "f.txt"))], str(tmp_path))
    corpus = plan(entries, multiple_docs_in_single_file=True, slice_docs=2)
    assert [s.n_docs for s in corpus.slices] == [2, 1] and [s.first_doc for s in corpus.slices] == [0, 2]
    first, _ = texts(corpus.slices[0], None, True)
    second, _ = texts(corpus.slices[1], None, True)
    assert first == ["s1 a\ns2 a\n", "s1 b\n"]
    assert second == ["s1 c\ns2 c\n"]
    docs = list(read_documents(corpus.slices[1].sources, None, True, []))
    assert [(doc.label, doc.corpus_doc) for doc in docs] == [("f.txt#2", 2)]
    assert path.exists()


def test_separator_line_and_slices_spanning_files(tmp_path):
    write(tmp_path / "a.txt", "one\n[SEP]\ntwo\n  [SEP]  \nthree")
    write(tmp_path / "b.txt", "four\n[SEP]\n\n[SEP]\nfive [SEP] inline stays\n")
    entries = read_metadata([str(write(tmp_path / "m.txt", "a.txt\nb.txt"))], str(tmp_path))
    corpus = plan(entries, multiple_docs_in_single_file=True, separator_line="[SEP]")
    assert corpus.n_docs == 5 and corpus.docs_per_path == {entries[0].path: 3, entries[1].path: 2}
    assert texts(corpus, "[SEP]", True)[0] == ["one\n", "two\n", "three", "four\n", "five [SEP] inline stays\n"]
    docs = list(read_documents(sources(corpus), "[SEP]", True, []))
    assert [(doc.label, doc.corpus_doc) for doc in docs][2:4] == [("a.txt#2", 2), ("b.txt#0", 3)]


def test_binary_empty_and_invalid_utf8_documents(tmp_path):
    write(tmp_path / "bin.txt", b"abc\x00def")
    write(tmp_path / "empty.txt", "  \n\t\n")
    write(tmp_path / "latin1.txt", "caf\xe9 ok".encode("latin-1"))
    entries = read_metadata([str(write(tmp_path / "m.txt", "bin.txt\nempty.txt\nlatin1.txt"))], str(tmp_path))
    skips = []
    docs = list(read_documents(sources(plan(entries)), None, False, skips))
    assert [(s.reason, s.label, s.corpus_doc) for s in skips] == [(BINARY, "bin.txt", 0), (EMPTY, "empty.txt", 1)]
    assert docs[0].text == "caf\ufffd ok" and docs[0].n_replaced == 1


def test_validation_choice_is_stable_and_near_the_fraction():
    labels = [f"docs/{i}.txt" for i in range(5000)]
    chosen = [is_validation_document(label, 0, 0.2) for label in labels]
    assert abs(sum(chosen) / len(labels) - 0.2) < 0.02
    # Adding documents never moves others; the seed changes the choice.
    assert chosen[:100] == [is_validation_document(label, 0, 0.2) for label in labels[:100]]
    assert chosen != [is_validation_document(label, 1, 0.2) for label in labels]
    assert not any(is_validation_document(label, 0, 0.0) for label in labels)


def test_the_corpus_is_sliced_for_parallel_tokenization(tmp_path):
    lines = []
    for i in range(300):
        lines += [f"sentence {i}", ""]
    write(tmp_path / "big.txt", "\n".join(lines))
    for i in range(5):
        write(tmp_path / f"{i}.txt", "x" * 1000)
    m = write(tmp_path / "m.txt", "big.txt")
    entries = read_metadata([str(m)], str(tmp_path))
    corpus = plan(entries, multiple_docs_in_single_file=True, slice_docs=30)
    assert [s.n_docs for s in corpus.slices] == [30] * 10
    assert [s.first_doc for s in corpus.slices] == list(range(0, 300, 30))
    found = [doc.text.strip() for doc in read_documents(corpus.slices[4].sources, None, True, [])]
    assert found == [f"sentence {i}" for i in range(120, 150)]
    entries = read_metadata([str(write(tmp_path / "m2.txt", "\n".join(f"{i}.txt" for i in range(5))))], str(tmp_path))
    corpus = plan(entries, slice_docs=64, slice_bytes=2500)
    assert [s.n_docs for s in corpus.slices] == [2, 2, 1] and corpus.n_bytes == 5000


def test_large_documents_are_cut_into_parts_at_paragraph_line_or_space(tmp_path):
    text = ("word " * 30 + "\n") * 50 + "\n" + ("mot " * 40 + "\n") * 50  # about 15.5 KB
    path = write(tmp_path / "big.txt", text)
    data = path.read_bytes()
    parts = document_parts(str(path), len(data), 4000)
    assert parts[0][0] == 0 and parts[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
    assert all(data[end - 1 : end] in (b"\n", b" ") for _, end in parts[:-1])
    assert len(parts) >= 4
    no_space = write(tmp_path / "dense.txt", "\u00e9" * 5000)  # two bytes a character, no white space
    cuts = document_parts(str(no_space), 10000, 3001)
    assert all((end - start) % 2 == 0 for start, end in cuts)  # never inside a character
    entries = read_metadata([str(write(tmp_path / "m.txt", "big.txt"))], str(tmp_path))
    corpus = plan(entries, part_bytes=4000, slice_bytes=2000)
    assert corpus.n_docs == 1 and len(corpus.slices) == len(parts)
    assert [s.continues for s in sources(corpus)] == [False] + [True] * (len(parts) - 1)
    assert all(s.in_parts and s.corpus_doc == 0 for s in sources(corpus))
    assert [s.starts_with_a_part for s in corpus.slices] == [False] + [True] * (len(parts) - 1)
    found = [doc.text for doc in read_documents(sources(corpus), None, False, [])]
    assert "".join(found) == text
