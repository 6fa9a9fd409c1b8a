#!/usr/bin/env python3
"""Thin wrapper so `python scripts/create_tfrecords.py ...` works as the Cerebras docs show."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bert_data.cli.create_tfrecords import command  # noqa: E402

if __name__ == "__main__":
    command()
