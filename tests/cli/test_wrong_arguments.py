"""Wrong arguments named at their cause, in one line, before any work (a prefix, a metadata file,
a vocabulary that is not one), and documents given as paths or globs (--input_files)."""

from __future__ import annotations

import json
import re

import pytest


from tests.helpers.cli_runs import base_options as base, run_cli as cli
from tests.helpers.corpus import file_hashes, make_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("traps"), n_docs=12, min_sentences=5, max_sentences=12)


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("create_tfrecords: error: "), err
    return lines[0]


def test_missing_prefix_directory_is_named_before_any_work(capsys, corpus, tmp_path):
    for extra in ([], ["--skip_missing"]):
        code, err = cli(capsys, "--metadata_files", corpus.metadata, "--input_files_prefix", tmp_path / "nowhere",
                        *base(corpus, tmp_path / "out"), *extra)
        assert code == 2
        assert one_error_line(err) == (f"create_tfrecords: error: --input_files_prefix {tmp_path / 'nowhere'} does not "
                                       "exist (the document paths are relative to it)")
    assert not (tmp_path / "out").exists()


def test_wrong_prefix_that_exists_is_named_not_the_first_missing_file(capsys, corpus, tmp_path):
    for extra in ([], ["--skip_missing"]):
        code, err = cli(capsys, "--metadata_files", corpus.metadata, "--input_files_prefix", tmp_path,
                        *base(corpus, tmp_path / "out"), *extra)
        assert code == 2
        line = one_error_line(err)
        assert f"{corpus.metadata}: none of its 12 lines names an existing file under --input_files_prefix {tmp_path}" \
            in line and "is --input_files_prefix right?" in line
        assert "skipped" not in err  # no warning per missing file


def test_a_text_file_given_as_metadata_is_named(capsys, corpus, tmp_path):
    prose = tmp_path / "speech.txt"
    prose.write_text("Fellow-Citizens of the Senate and of the House of Representatives:\n\n"
                     "Among the vicissitudes incident to life no event could have filled me with greater anxieties.\n")
    for extra in ([], ["--skip_missing"]):
        code, err = cli(capsys, "--metadata_files", prose, *base(corpus, tmp_path / "out"), *extra)
        assert code == 2
        assert one_error_line(err) == (
            f"create_tfrecords: error: {prose} does not look like a metadata file: line 1 is prose, not a path; none of "
            "its 2 lines names an existing file (a metadata file lists document paths, one a line; to read text files "
            "directly use --input_files)")
    jsonl = tmp_path / "data.jsonl"
    jsonl.write_text('{"text": "a"}\n{"text": "b"}\n')
    code, err = cli(capsys, "--metadata_files", jsonl, *base(corpus, tmp_path / "out"))
    assert code == 2 and "line 1 is JSON, not a path" in err


def test_a_metadata_file_with_some_missing_files_still_names_the_first_missing(capsys, corpus, tmp_path):
    metadata = tmp_path / "m.txt"
    metadata.write_text(corpus.metadata.read_text() + "docs/nope.txt\n")
    code, err = cli(capsys, "--metadata_files", metadata, "--input_files_prefix", corpus.root,
                    *base(corpus, tmp_path / "out"))
    assert code == 2 and f"{metadata}:13: file not found" in err and "--skip_missing" in err


@pytest.mark.parametrize("content, problem", [
    ("The quick brown fox jumps over the lazy dog.\nIt was not amused.\n",
     "line 1 holds several words ('The quick brown fox jumps over the lazy ...'); it also lacks [PAD] [UNK] [CLS] "
     "[SEP] [MASK]"),
    ("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n\nworld\n\nagain\n", "2 lines are blank (lines 7 and 9 first)"),
])
def test_a_file_that_is_not_a_vocabulary_is_named(capsys, corpus, tmp_path, content, problem):
    vocab = tmp_path / "notes.txt"
    vocab.write_text(content)
    code, err = cli(capsys, "--metadata_files", corpus.metadata, "--input_files_prefix", corpus.root,
                    *base(corpus, tmp_path / "out"), "--vocab_file", vocab)
    assert code == 2
    assert one_error_line(err) == (f"create_tfrecords: error: {vocab} does not look like a BERT vocabulary (one token "
                                   f"a line): {problem}")


def test_input_files_paths_and_globs_give_the_bytes_of_a_metadata_file(capsys, corpus, tmp_path):
    assert cli(capsys, "--metadata_files", corpus.metadata, "--input_files_prefix", corpus.root,
               *base(corpus, tmp_path / "listed"))[0] == 0
    code, err = cli(capsys, "--input_files", "docs/doc00*.txt", "docs/doc01[01].txt", "--input_files_prefix",
                    corpus.root, *base(corpus, tmp_path / "globbed"))
    assert code == 0, err
    assert file_hashes(tmp_path / "globbed") == file_hashes(tmp_path / "listed")
    manifest = json.loads((tmp_path / "globbed" / "data_params.json").read_text())
    assert manifest["n_docs"] == 12 and manifest["input_files"] == ["docs/doc00*.txt", "docs/doc01[01].txt"]
    # Comma-separated, without a prefix, and after a metadata file.
    first = ",".join(str(corpus.root / f"docs/doc00{i}.txt") for i in range(3))
    code, err = cli(capsys, "--input_files", first, *base(corpus, tmp_path / "plain"))
    assert code == 0 and json.loads((tmp_path / "plain" / "data_params.json").read_text())["n_docs"] == 3
    code, err = cli(capsys, "--input_files", tmp_path / "none*.txt", *base(corpus, tmp_path / "x"))
    assert code == 2 and f"input pattern {tmp_path / 'none*.txt'} matches no file" in err
    code, err = cli(capsys, "--input_files", tmp_path / "gone.txt", *base(corpus, tmp_path / "x"))
    assert code == 2 and f"--input_files:1: file not found: {tmp_path / 'gone.txt'}" in err


def test_a_tokenizer_json_or_a_binary_file_given_as_vocab_file_is_named(capsys, corpus, tmp_path):
    """A tokenizer.json points to --tokenizer_file; a program is a binary file, not "not valid UTF-8"."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordPiece

    tokenizer_json = tmp_path / "tokenizer.json"
    Tokenizer(WordPiece({"[PAD]": 0, "[UNK]": 1, "hello": 2}, unk_token="[UNK]")).save(str(tokenizer_json), pretty=True)
    binary = tmp_path / "ls"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 16)
    for vocab, expected in ((tokenizer_json, "is a Hugging Face tokenizer.json, not a vocab.txt (one token a line): "
                                             "pass it as --tokenizer_file"),
                            (binary, "is a binary file, not a BERT vocabulary (a vocab.txt holds one token a line)")):
        code, err = cli(capsys, "--metadata_files", corpus.metadata, "--input_files_prefix", corpus.root,
                        *base(corpus, tmp_path / "out"), "--vocab_file", vocab)
        assert code == 2
        assert one_error_line(err) == f"create_tfrecords: error: {vocab} {expected}"


def test_a_validation_split_that_ends_empty_or_leaves_training_little_is_a_warning(capsys, corpus, tmp_path):
    code, err = cli(capsys, "--metadata_files", corpus.metadata, "--input_files_prefix", corpus.root,
                    *base(corpus, tmp_path / "few"), "--val_fraction", "0.001", "--num_output_files", "3")
    assert code == 0, err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert warnings == [
        "create_tfrecords: warning: --val_fraction 0.001 holds out none of the 12 documents (about 0.012 expected): "
        "the validation shards will be empty; raise --val_fraction (0.42 holds out about 5 documents) or name "
        "validation documents with --val_metadata_files",
        "create_tfrecords: warning: val: no example: its 3 files are empty; raise --val_fraction or name validation "
        "documents with --val_metadata_files"]
    code, err = cli(capsys, "--metadata_files", corpus.metadata, "--input_files_prefix", corpus.root,
                    *base(corpus, tmp_path / "most"), "--val_fraction", "0.9", "--num_output_files", "1")
    assert code == 0, err
    train = json.loads((tmp_path / "most" / "train" / "data_params.json").read_text())["n_docs"]
    assert train < 6
    assert [line for line in err.splitlines() if "warning" in line] == [
        f"create_tfrecords: warning: --val_fraction 0.9 leaves {train} of the 12 documents for training ({12 - train} "
        "held out for validation); lower --val_fraction, the share held out (e.g. 0.05)"]
    # Shards left empty by a small split are named with the fix.
    code, err = cli(capsys, "--metadata_files", corpus.metadata, "--input_files_prefix", corpus.root,
                    *base(corpus, tmp_path / "many"), "--num_output_files", "200")
    assert code == 0, err
    assert re.search(r"create_tfrecords: warning: train: \d+ of 200 files hold no example \(\d+ examples in all\); "
                     r"pass a smaller --num_output_files", err), err
def test_a_metadata_file_given_as_a_document_is_named_with_the_option_it_belongs_to(capsys, corpus, tmp_path):
    """The reverse of a text file given as metadata: trained on as text, it would write records of
    ``t ##xt do ##c ##s`` with exit 0."""
    code, err = cli(capsys, "--input_files", corpus.metadata, "--input_files_prefix", corpus.root,
                    *base(corpus, tmp_path / "out"))
    assert code == 2
    assert one_error_line(err) == (
        f"create_tfrecords: error: {corpus.metadata.relative_to(corpus.root)} looks like a metadata file: each of its "
        "12 lines names an existing file; list documents with --metadata_files, or pass --read_path_lists_as_text "
        "to read it as text")
    assert not (tmp_path / "out").exists()
    # Absolute paths, without a prefix; and Google's --input_file too.
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{corpus.root / label}\n\n" for label in list(corpus.documents)[:3]))
    code, err = cli(capsys, "--input_files", listing, *base(corpus, tmp_path / "out"))
    assert code == 2 and "each of its 3 lines names an existing file" in err
    code, err = cli(capsys, f"--input_file={listing}", f"--output_file={tmp_path / 'x.tfrecord'}",
                    f"--vocab_file={corpus.vocab}")
    assert code == 2 and "--metadata_files" in err
    # Insisting reads it as text; a document whose first line is a path, then prose, is text.
    code, err = cli(capsys, "--input_files", listing, *base(corpus, tmp_path / "insisted"), "--read_path_lists_as_text",
                    "--allow_case_mismatch")
    assert code == 0, err
    mixed = tmp_path / "mixed.txt"
    mixed.write_text(f"{corpus.metadata}\nThe file above lists the documents of the corpus we read.\n")
    code, err = cli(capsys, "--input_files", mixed, *base(corpus, tmp_path / "mixed"), "--allow_case_mismatch")
    assert code == 0, err


def test_each_tokenizer_file_given_to_another_tokenizer_option_names_its_own(capsys, corpus, tmp_path):
    """A vocab.txt, a SentencePiece model or a tokenizer.json in the wrong one of --vocab_file,
    --tokenizer_file and --spm_model_file: the line names the option it belongs to (not
    sentencepiece's protobuf error or tokenizers' JSON error)."""
    import sentencepiece

    text = tmp_path / "text.txt"
    text.write_text("".join(f"the word number {i} of a small text about birds and glaciers .\n" for i in range(300)))
    sentencepiece.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / "m"), vocab_size=60,
                                             minloglevel=2)
    model = tmp_path / "m.model"
    inputs = ["--metadata_files", corpus.metadata, "--input_files_prefix", corpus.root, "--output_dir", tmp_path / "o",
              "--quiet"]
    for option, given, expected in (
            ("--tokenizer_file", corpus.vocab, "is not a tokenizer.json but a BERT vocabulary (vocab.txt, one token a "
                                               "line): pass it as --vocab_file"),
            ("--tokenizer_file", model, "is not a tokenizer.json but a SentencePiece model: pass it as --spm_model_file"),
            ("--spm_model_file", corpus.vocab, "is not a SentencePiece model but a BERT vocabulary (vocab.txt, one "
                                               "token a line): pass it as --vocab_file")):
        code, err = cli(capsys, *inputs, option, given)
        assert code == 2
        assert one_error_line(err) == f"create_tfrecords: error: {given} {expected}"
    assert not (tmp_path / "o").exists()


def test_a_metadata_file_saved_with_a_byte_order_mark_reads_as_without(capsys, corpus, tmp_path):
    """Windows editors' "UTF-8 with BOM": the mark is no part of the first path (it was 'file not
    found: <invisible mark>docs/a.txt')."""
    with_mark = tmp_path / "metadata-bom.txt"
    with_mark.write_bytes(b"\xef\xbb\xbf" + corpus.metadata.read_bytes())
    for metadata, out in ((corpus.metadata, "plain"), (with_mark, "marked")):
        code, err = cli(capsys, "--metadata_files", metadata, "--input_files_prefix", corpus.root,
                        *base(corpus, tmp_path / out))
        assert code == 0, err
    assert file_hashes(tmp_path / "plain") == file_hashes(tmp_path / "marked")


def test_a_percentage_given_as_a_probability_names_the_fraction(capsys, corpus, tmp_path):
    code, err = cli(capsys, "--metadata_files", corpus.metadata, "--input_files_prefix", corpus.root,
                    *base(corpus, tmp_path / "o"), "--masked_lm_prob", "15")
    assert code == 2
    assert one_error_line(err) == ("create_tfrecords: error: --masked_lm_prob must be in (0, 1], got 15.0 (a fraction: "
                                   "0.15 for 15%)")


def test_json_lines_with_their_text_under_another_key_name_text_field(capsys, corpus, tmp_path):
    lines = tmp_path / "c.jsonl"
    lines.write_text("".join(json.dumps({"content": "Birds fly south. They come back in spring.", "id": i}) + "\n"
                             for i in range(5)))
    code, err = cli(capsys, "--input_files", lines, *base(corpus, tmp_path / "out"))
    assert code == 2
    line = one_error_line(err)
    assert line.startswith("create_tfrecords: error: no document with any text: every listed document was skipped "
                           "(5 missing text key: ")
    assert line.endswith("name the key of the documents' text with --text_field (looked for 'text')")
    code, err = cli(capsys, "--input_files", lines, *base(corpus, tmp_path / "fixed"), "--text_field", "content",
                    "--allow_case_mismatch")
    assert code == 0, err
