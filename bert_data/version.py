"""The package version, in a module of its own: modules that record it (the manifest, the run's
fingerprint) import it from here, not from the package, whose ``__init__`` imports them lazily."""

__version__ = "0.1.0"
