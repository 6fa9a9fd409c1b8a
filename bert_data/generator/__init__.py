"""Generating: documents -> sentences -> token ids -> instances -> masked, encoded examples ->
shards, and the orchestration that runs those stages on an executor."""
