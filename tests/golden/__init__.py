"""The exact bytes of a fixed run."""
