"""The package's structure: no import cycles."""
