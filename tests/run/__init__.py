"""Orchestration: settings resolved once, end-to-end runs, the same bytes for any number of
workers, Dask, object storage, the final shuffle."""
