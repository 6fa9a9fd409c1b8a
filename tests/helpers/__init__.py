"""Helper modules shared by the tests of every folder (fixtures stay in tests/conftest.py)."""
