"""The configuration is resolved once (run/resolve.py): validated once, the tokenizer source,
the masking spec and every stage's spec derived once, and each task handed only its own narrow
spec, which travels without the planning vocabulary.  What does not change the bytes (the run
control) is one list, kept out of the manifest and the --resume fingerprint."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from bert_data.cli.create_tfrecords import main
from bert_data.config import RUN_CONTROL_OPTIONS, ConfigError, GeneratorConfig
from bert_data.run import resolve as settings_module, runner, scheduler
from bert_data.run.resolve import generate, resolve
from bert_data.run.specs import EncodeSpec, PairSpec, RunControl, RunSpec, TokenizeSpec

from tests.helpers.corpus import file_hashes, make_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("settings"), n_docs=6, min_sentences=5, max_sentences=10)


def config(corpus, output, **options) -> GeneratorConfig:
    options = dict(dict(num_workers=1), **options)
    return GeneratorConfig(metadata_files=[str(corpus.metadata)], input_files_prefix=str(corpus.root),
                           vocab_file=str(corpus.vocab), do_lower_case=True, output_dir=str(output), dupe_factor=1,
                           max_seq_length=64, max_predictions_per_seq=10, **options)


def count_calls(monkeypatch, owner, name: str) -> list:
    calls = []
    original = getattr(owner, name)

    def counted(*args, **kwargs):
        calls.append(name)
        return original(*args, **kwargs)

    # Class methods are looked up on the class: wrap the bound function, keep it a classmethod.
    monkeypatch.setattr(owner, name, classmethod(lambda cls, *a, **k: counted(*a, **k))
                        if isinstance(owner.__dict__.get(name), classmethod) else counted)
    return calls


@pytest.mark.parametrize("through", ["library", "command line"])
def test_a_run_validates_and_derives_its_configuration_once(corpus, tmp_path, monkeypatch, through):
    validations = count_calls(monkeypatch, GeneratorConfig, "validate")
    sources = count_calls(monkeypatch, settings_module, "tokenizer_source")
    maskings = count_calls(monkeypatch, settings_module, "masking_spec")
    if through == "library":
        generate(config(corpus, tmp_path / "out"), progress=False)
    else:
        assert main(["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root),
                     "--vocab_file", str(corpus.vocab), "--do_lower_case", "--output_dir", str(tmp_path / "out"),
                     "--dupe_factor", "1", "--num_workers", "1", "--max_seq_length", "64",
                     "--max_predictions_per_seq", "10", "--quiet"]) == 0
    assert (len(validations), len(sources), len(maskings)) == (1, 1, 1)


def test_each_task_receives_its_own_spec_never_the_configuration(corpus, tmp_path, monkeypatch):
    expected = {"tokenize_slice": TokenizeSpec, "pair_unit": PairSpec, "encode_shards": EncodeSpec}
    seen = set()
    for task, spec_type in expected.items():
        original = getattr(scheduler, task)

        def recorded(*args, _original=original, _task=task, _type=spec_type):
            assert not any(isinstance(arg, (GeneratorConfig, RunSpec)) for arg in args), _task
            seen.add((_task, sum(isinstance(arg, _type) for arg in args)))
            return _original(*args)

        monkeypatch.setattr(scheduler, task, recorded)
    generate(config(corpus, tmp_path / "out"), progress=False)
    assert seen == {(task, 1) for task in expected}


def test_specs_travel_without_the_planning_vocabulary(corpus):
    resolved = resolve(config(corpus, "unused"))
    assert resolved.vocab is not None and resolved.masking is not None
    travelled = pickle.loads(pickle.dumps(resolved))
    assert travelled.vocab is None  # a worker builds its own tokenizer, vocabulary and all
    assert travelled == resolved  # (the vocabulary is not compared: every spec is)
    word = resolved.vocab.tokens[-4]  # a stem of the synthetic vocabulary, in no option
    assert word.encode() in pickle.dumps(resolved.vocab)
    for spec in (resolved, resolved.tokenizing, resolved.pairing, resolved.encoding):
        assert word.encode() not in pickle.dumps(spec)
    assert resolve(config(corpus, "unused", disable_masking=True, mlm_only=True)).masking is None


def test_run_control_is_one_list_out_of_the_manifest_and_the_fingerprint(corpus, tmp_path):
    assert tuple(field.name for field in dataclasses.fields(RunControl)) == RUN_CONTROL_OPTIONS
    resolved = resolve(config(corpus, "unused"))
    assert not set(RUN_CONTROL_OPTIONS) & set(resolved.options)
    one = generate(config(corpus, tmp_path / "one", num_workers=1), progress=False)
    two = generate(config(corpus, tmp_path / "two", num_workers=2, allow_paths_outside_prefix=True), progress=False)
    # The manifests record the options (at their top level) but none of the run control.
    assert not set(RUN_CONTROL_OPTIONS) & set(one.manifests["train"])
    assert {split: dict(m, output_dir=None) for split, m in one.manifests.items()} == \
           {split: dict(m, output_dir=None) for split, m in two.manifests.items()}
    assert file_hashes(tmp_path / "one") == file_hashes(tmp_path / "two")


def test_bad_options_stop_the_command_before_a_cluster_starts(corpus, tmp_path, monkeypatch, capsys):
    import bert_data.run.executors as executors

    def no_cluster(*args, **kwargs):
        raise AssertionError("a Dask cluster was started for a command line that cannot run")

    monkeypatch.setattr(executors, "dask_executor", no_cluster)
    code = main(["--metadata_files", str(corpus.metadata), "--vocab_file", str(corpus.vocab), "--dask",
                 "--output_dir", str(tmp_path / "out"), "--mlm_only", "--document_separator_token", "[NOPE]"])
    assert code == 2
    assert "--document_separator_token [NOPE] is not in" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="--masked_lm_prob"):
        settings_module.resolve(config(corpus, tmp_path / "out", masked_lm_prob=2.0))


@pytest.mark.parametrize("msl, mpp, warned, advice", [
    (128, 20, False, None),  # Google's defaults: 125 tokens * 0.15 = 19 predictions fit in 20
    (512, 20, True, "caps masking at 3.9% of a full 512-token instance, well below --masked_lm_prob 0.15; use "
                    "--max_predictions_per_seq 77"),
    (1024, 20, True, "caps masking at 2.0% of a full 1,024-token instance"),
    (512, 77, False, None),
])
def test_a_prediction_cap_well_below_masked_lm_prob_is_warned(capsys, corpus, tmp_path, msl, mpp, warned, advice):
    code = main([str(a) for a in ["--metadata_files", corpus.metadata, "--input_files_prefix", corpus.root,
                                  "--vocab_file", corpus.vocab, "--do_lower_case", "--output_dir", tmp_path / "o",
                                  "--dupe_factor", "1", "--quiet", "--num_workers", "1",
                                  "--max_seq_length", msl, "--max_predictions_per_seq", mpp]])
    err = capsys.readouterr().err
    assert code == 0, err
    assert ("create_tfrecords: warning: --max_predictions_per_seq" in err) == warned
    if advice:
        assert advice in err


def test_library_warnings_name_no_command_unless_one_runs(monkeypatch, capsys):
    from bert_data import notices
    from bert_data.config import GeneratorConfig
    from bert_data.run.resolve import check_masking_budget

    monkeypatch.setattr(notices, "_program", "bert_data")  # as a fresh interpreter has it
    config = GeneratorConfig(metadata_files=["m.txt"], vocab_file="v.txt", max_seq_length=1024)
    check_masking_budget(config)
    assert capsys.readouterr().err.startswith("bert_data: warning: --max_predictions_per_seq 20 caps masking")
    notices.use_program_name("create_tfrecords")
    check_masking_budget(config)
    assert capsys.readouterr().err.startswith("create_tfrecords: warning: --max_predictions_per_seq 20")
