"""Memory of a process as Linux reports it in /proc (the benchmark scripts' shared reading)."""
from __future__ import annotations

from pathlib import Path


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS (resident now) and VmHWM (resident peak) of `pid`, in KiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out
