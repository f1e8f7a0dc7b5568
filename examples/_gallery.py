"""What every gallery script shares: its quick mode for CI and its self-checks."""
from __future__ import annotations

import os


def quick_by_default() -> bool:
    """Quick mode when the environment asks for it (``SRCGRAD_QUICK=1``), as CI does."""
    return os.environ.get("SRCGRAD_QUICK", "") not in ("", "0")


def check(condition: bool, message: str) -> None:
    """Stop with ``FAILED: message`` (exit status 1) when an example's own number is wrong."""
    if not condition:
        raise SystemExit(f"FAILED: {message}")
