"""The error of `run`'s collectors, apart so that runner.py and torchrun.py can both raise it."""
from __future__ import annotations


class RunError(Exception):
    """Bad input to `run`; the message is one sentence for the user."""
