"""The test suite: a package, so that test modules are imported by their dotted names
(tests.run.test_dask, ...) and helpers as tests.helpers.*, from any folder."""
