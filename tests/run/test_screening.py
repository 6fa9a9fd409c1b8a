"""--dedup and --decontaminate end to end: planted duplicates and contaminated documents are
removed and nothing else, the report names them per input file, and the bytes are the same for
any number of workers and after --resume."""

from __future__ import annotations

import json
import re

import pytest

from bert_data.pipeline.dedup import normalized_words
from bert_data.run.resolve import generate

from tests.helpers.cli_runs import run_tools, small_run
from tests.helpers.corpus import corpus_config, file_hashes, make_corpus
from tests.helpers.interruptions import interrupted_at_append

N_DOCS = 24


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A corpus of distinct documents, with copies planted: an exact one (case and punctuation
    changed) of doc003, a near one (two words changed) of doc010, a blend of halves of doc012
    and doc013 (distinct: kept), and a copy of doc020 listed first (the copy is kept, doc020
    goes).  And evaluation sets: a 13-gram of doc005, a 12-gram of doc006."""
    root = tmp_path_factory.mktemp("screening")
    corpus = make_corpus(root / "corpus", n_docs=N_DOCS, min_sentences=40, max_sentences=50, words_per_doc=30)
    docs = corpus.root / "docs"

    def text(index: int) -> str:
        return (docs / f"doc{index:03d}.txt").read_text()

    (docs / "exact.txt").write_text(text(3).upper().replace(".", " !"))
    near = text(10).split(" ")
    near[20], near[200] = near[21], near[201]
    (docs / "near.txt").write_text(" ".join(near))
    lines12, lines13 = text(12).split("\n"), text(13).split("\n")
    (docs / "blend.txt").write_text("\n".join(lines12[: len(lines12) // 2] + lines13[len(lines13) // 2:]))
    (docs / "first.txt").write_text(text(20))
    listed = corpus.metadata.read_text().split()
    corpus.metadata.write_text("\n".join(["docs/first.txt"] + listed + ["docs/exact.txt", "docs/near.txt",
                                                                          "docs/blend.txt"]) + "\n")
    five, six = normalized_words(text(5)), normalized_words(text(6))
    (root / "squad.txt").write_text("a question\n" + " ".join(five[100:113]) + "\n")
    (root / "glue.jsonl").write_text(json.dumps({"text": " ".join(six[100:112])}) + "\n")
    return corpus, root


def run(corpus, output, **options):
    summary = generate(corpus_config(corpus, output, split_num=4, **options), progress=False)
    return summary.manifests["train"]


def test_planted_duplicates_go_and_distinct_documents_stay(planted, tmp_path):
    corpus, _ = planted
    manifest = run(corpus, tmp_path / "near", dedup="near")
    removed = manifest["documents_removed"]
    assert (removed["documents"], removed["exact_duplicates"], removed["near_duplicates"]) == (3, 2, 1)
    assert sorted(removed["by_file"]) == ["docs/doc020.txt", "docs/exact.txt", "docs/near.txt"]
    assert removed["by_file"]["docs/near.txt"]["near_duplicates"] == 1
    assert manifest["n_docs"] == N_DOCS + 4 - 3  # the blend and every distinct document stay
    exact = run(corpus, tmp_path / "exact", dedup="exact")["documents_removed"]
    assert sorted(exact["by_file"]) == ["docs/doc020.txt", "docs/exact.txt"]


def test_a_13_gram_of_an_evaluation_set_removes_its_document_and_a_12_gram_does_not(planted, tmp_path):
    corpus, root = planted
    evaluation = [str(root / "squad.txt"), str(root / "glue.jsonl")]
    manifest = run(corpus, tmp_path / "out", decontaminate=evaluation)
    removed = manifest["documents_removed"]
    assert removed["contaminated"] == {evaluation[0]: 1, evaluation[1]: 0}
    assert list(removed["by_file"]) == ["docs/doc005.txt"]
    assert manifest["n_docs"] == N_DOCS + 4 - 1
    twelve = run(corpus, tmp_path / "twelve", decontaminate=evaluation, decontamination_ngram=12)
    assert twelve["documents_removed"]["contaminated"] == {evaluation[0]: 1, evaluation[1]: 1}


def test_passages_mode_removes_only_the_overlapping_lines(planted, tmp_path):
    corpus, root = planted
    plain = run(corpus, tmp_path / "plain")
    manifest = run(corpus, tmp_path / "out", decontaminate=[str(root / "squad.txt")], decontaminate_mode="passages")
    removed = manifest["documents_removed"]
    lines = removed["contaminated_lines"][str(root / "squad.txt")]
    # The lines of doc005 holding its words 100..112 (the planted 13-gram).
    line_of_word = [number for number, line in enumerate((corpus.root / "docs" / "doc005.txt").read_text().split("\n"))
                    for _ in normalized_words(line)]
    expected = len(set(line_of_word[100:113]))
    assert (lines["documents"], lines["lines"], lines["documents_emptied"]) == (1, expected, 0)
    assert removed["documents"] == 0 and list(removed["by_file"]) == ["docs/doc005.txt"]
    assert manifest["n_docs"] == plain["n_docs"]
    # Only a few sentences' tokens went (a line of the synthetic corpus is one sentence).
    assert 0 < plain["n_tokens"] - manifest["n_tokens"] < 15 * expected


def test_the_bytes_do_not_depend_on_workers_and_survive_resume(planted, tmp_path):
    corpus, root = planted
    options = dict(dedup="near", decontaminate=[str(root / "squad.txt")])
    run(corpus, tmp_path / "one", **options)
    reference = file_hashes(tmp_path / "one")
    plain = tmp_path / "plain"
    run(corpus, plain)
    assert reference and reference != file_hashes(plain)
    run(corpus, tmp_path / "two", num_workers=2, **options)
    assert file_hashes(tmp_path / "two") == reference
    output = tmp_path / "resumed"
    with interrupted_at_append(2), pytest.raises(KeyboardInterrupt):
        run(corpus, output, **options)
    manifest = run(corpus, output, resume=True, num_workers=2, **options)
    assert file_hashes(output) == reference
    assert manifest["documents_removed"]["documents"] == 4


def test_the_megatron_corpus_leaves_removed_documents_out(planted, tmp_path):
    corpus, _ = planted
    manifest = run(corpus, tmp_path / "out", dedup="exact", output_format="megatron")
    assert manifest["n_docs"] == N_DOCS + 4 - 2


def test_the_console_and_bert_data_stats_say_what_was_removed(planted, tmp_path, capsys):
    corpus, root = planted
    output = tmp_path / "out"
    code, err = small_run(capsys, corpus, output, "--dedup", "exact", "--decontaminate", root / "squad.txt")
    assert code == 0
    line = f"2 exact duplicates; contaminated: {root / 'squad.txt'} 1)"
    assert f"train: 3 documents removed ({line}" in err
    code, out, _ = run_tools(["stats", output], capsys)
    assert code == 0 and f"removed before use    3 documents removed ({line}" in out
    # A mistyped mode is one line naming the choices.
    with pytest.raises(SystemExit) as exit_:
        small_run(capsys, corpus, tmp_path / "bad", "--dedup", "fuzzy")
    assert exit_.value.code == 2
    assert "argument --dedup: invalid choice: 'fuzzy' (choose from exact, near)" in capsys.readouterr().err


@pytest.mark.parametrize("options,message", [
    (dict(dedup="near", dedup_threshold=1.5), "--dedup_threshold must be a Jaccard similarity in (0, 1], got 1.5"),
    (dict(dedup_shingle_size=0), "--dedup_shingle_size must be at least 1"),
    (dict(decontaminate=["a.txt", "a.txt"]), "--decontaminate names an evaluation set twice"),
    (dict(decontaminate_mode="sentences"), "--decontaminate_mode must be documents or passages"),
])
def test_bad_screening_options_are_one_line_naming_the_option(tmp_path, options, message):
    from bert_data.config import ConfigError, GeneratorConfig

    with pytest.raises(ConfigError, match=re.escape(message)):
        GeneratorConfig(metadata_files=["m.txt"], vocab_file="v.txt", **options).validate()


def test_a_missing_evaluation_set_stops_before_any_work_and_a_changed_one_refuses_resume(planted, tmp_path):
    from bert_data.pipeline.documents.types import InputError

    corpus, root = planted
    with pytest.raises(InputError, match=r"^--decontaminate .*missing\.txt: .*No such file"):
        run(corpus, tmp_path / "missing", decontaminate=[str(root / "missing.txt")])
    assert not (tmp_path / "missing").exists() or not any((tmp_path / "missing").glob("*.tfrecords*"))
    evaluation = tmp_path / "eval.txt"
    evaluation.write_text((root / "squad.txt").read_text())
    output = tmp_path / "out"
    with interrupted_at_append(2), pytest.raises(KeyboardInterrupt):
        run(corpus, output, decontaminate=[str(evaluation)])
    evaluation.write_text("other words entirely\n")
    with pytest.raises(Exception, match="the content of an evaluation set \\(--decontaminate\\) changed"):
        run(corpus, output, decontaminate=[str(evaluation)], resume=True)
