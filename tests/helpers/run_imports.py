"""Which modules a run imports: only a fresh interpreter can tell, since this one has imported
everything the tests needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def modules_a_run_imports(corpus, output, modules, *options) -> list:
    """Which of ``modules`` a quick create_tfrecords run of ``corpus`` into ``output`` (with
    ``options``) imports, run in a fresh interpreter at the repository's root."""
    argv = ["--metadata_files", corpus.metadata, "--input_files_prefix", corpus.root, "--vocab_file", corpus.vocab,
            "--do_lower_case", "--output_dir", output, "--dupe_factor", "1", *options, "--quiet"]
    script = ("import sys\n"
              "from bert_data.cli.create_tfrecords import main\n"
              "code = main(sys.argv[2:])\n"
              "assert code == 0, code\n"
              "print(' '.join(sorted(m for m in sys.argv[1].split(',') if m in sys.modules)))\n")
    result = subprocess.run([sys.executable, "-c", script, ",".join(modules), *map(str, argv)], capture_output=True,
                            text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()
