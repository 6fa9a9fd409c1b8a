"""The run: orchestration of the pipeline's stages.  Planning (checks, slices, units, the
``--resume`` fingerprint), the tasks (thin glue around :mod:`bert_data.pipeline`), the scheduler
and the executors they run on, the files a run writes (work directory, journal, lock, shards in
progress, manifests: :mod:`.run_files` alone names and deletes them), assembly of pieces into
shards, the final shuffle's file work, and remote staging.  ``generate`` (:mod:`.runner`) runs
it all from a resolved configuration (:mod:`.resolve`)."""
