"""The package's structure: no import circles, what each layer may import, small modules,
and the words and shared constants of the glossary true to the code."""
