"""The bert-data tools: verify, inspect, stats and build-vocab."""
