"""The command lines: options, messages, Google's compatible command line, wrong arguments,
robustness, and the docs that describe them."""
