"""The container's start command (`python -m ui.serve`): Streamlit serving app.py on 0.0.0.0:$PORT (default 8080).

Cloud Run tells the container its port in PORT. The process execs into Streamlit, so Streamlit is PID 1 and receives
the SIGTERM that Cloud Run sends before stopping an instance.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app.py"
DEFAULT_PORT = 8080


class ServeError(RuntimeError):
    """The environment cannot start the server; the message names the variable to fix."""


def port(env: Mapping[str, str]) -> int:
    """The port to listen on: PORT when set, else 8080."""
    raw = env.get("PORT", "").strip()
    if not raw:
        return DEFAULT_PORT
    if not raw.isdigit() or not 1 <= int(raw) <= 65535:
        raise ServeError(f"PORT must be a port number from 1 to 65535, not {raw[:20]!r}.")
    return int(raw)


def command(env: Mapping[str, str], python: str = sys.executable) -> list[str]:
    """The Streamlit command line; every other Streamlit setting comes from .streamlit/config.toml."""
    return [python, "-m", "streamlit", "run", str(APP), "--server.address=0.0.0.0", f"--server.port={port(env)}"]


def main() -> None:
    try:
        argv = command(os.environ)
    except ServeError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    # Streamlit finds .streamlit/config.toml in the working folder, which is the app's own.
    os.chdir(APP.parent)
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
