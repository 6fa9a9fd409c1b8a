"""Faults and recovery: interruptions and --resume, finalizing, full disks, killed workers,
output safety, bad input, secrets."""
