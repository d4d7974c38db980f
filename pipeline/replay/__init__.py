"""Replay and resume: the tape of recorded calls, and the checkpoints a run saves after each step."""
