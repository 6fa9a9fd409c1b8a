"""The companion tools behind ``bert-data``: verify, stats and inspect."""
