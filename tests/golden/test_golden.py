"""The exact bytes for a fixed corpus, options and seed.

An optimisation that changes these bytes must say why in its commit and update the values here,
with the statistical tests (run/test_end_to_end.py, pipeline/test_masking.py) still passing.
"""

from __future__ import annotations

import pytest

from bert_data.config import GeneratorConfig
from bert_data.run.resolve import generate

from tests.helpers.corpus import file_hashes, make_corpus

GOLDEN = {
    # (mask_whole_word, keep_corpus_order)
    # Mixed: units of runs of neighbouring documents, each shard shuffled at the end (issue 19).
    (False, False): {
        "examples-1.tfrecords": "97735bb097e9dde07168a574910021df38a62ef4b7c7b37688955aec310f9080",
        "examples-2.tfrecords": "243dde9ec709885ac02bbd0385be8404dce984e06317a7869f27ee391a7e4b4f",
    },
    (True, False): {
        "examples-1.tfrecords": "dd1a7c65651c42827dc6c3216ea72077ddb3cfe298a1a5bc7cfa676ddebc0f3c",
        "examples-2.tfrecords": "a1d7f4f6944bb3734caf36f639b998d5b8e8da16a17dea0723282af353572e8e",
    },
    # With the listed order kept, the bytes are those of the versions before global mixing:
    # mixing changes which documents form a unit and shuffles the shards, nothing else.
    (False, True): {
        "examples-1.tfrecords": "c36344ca64407ff8cdb9fcf5a293d92c2b127122431d98ab196a124b312be137",
        "examples-2.tfrecords": "4b1135dcaa0a290d8f05b6a400c194004468e27318ae4ee1c3c5f2a136098661",
    },
    (True, True): {
        "examples-1.tfrecords": "4c7f95d47bf129c5d8940ab0f81fd60d635be3cbf4781190305724b5237c1308",
        "examples-2.tfrecords": "3df170194db2218779440663e04f3a7cf112ebf113bfa427fe36783703886f41",
    },
}


@pytest.mark.parametrize("whole_word,keep_corpus_order", sorted(GOLDEN))
def test_output_bytes_are_pinned(tmp_path, whole_word, keep_corpus_order):
    corpus = make_corpus(tmp_path / "c", n_docs=12, min_sentences=5, max_sentences=15)
    out = tmp_path / "out"
    generate(GeneratorConfig(metadata_files=[str(corpus.metadata)], input_files_prefix=str(corpus.root),
                             vocab_file=str(corpus.vocab), do_lower_case=True, max_seq_length=32,
                             max_predictions_per_seq=5, dupe_factor=2, split_num=5, num_output_files=2,
                             output_dir=str(out), num_workers=1, seed=7, mask_whole_word=whole_word,
                             keep_corpus_order=keep_corpus_order), progress=False)
    assert file_hashes(out) == GOLDEN[whole_word, keep_corpus_order]
