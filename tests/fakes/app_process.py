"""One app instance in a process of its own, for tests of several instances sharing one database: the live-run
registry, the spend ledger and the wrong-code limiter exactly as the app builds them on RESEARCH_DB, driven by JSON
lines on stdin (one command each) and answering one JSON line each on stdout.

Run as `python -m tests.fakes.app_process`; the environment gives RESEARCH_DB, the model and search settings (local
fakes), RESEARCH_HEARTBEAT_STALE and APP_BEAT_EVERY (seconds between a live run's heartbeats).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from pipeline.config import Settings
from pipeline.store import migrated_database
from pipeline.store.sql import SqlRunStore
from ui.access import AttemptLimiter
from ui.jobs import Job, JobRegistry, LiveLimits


class App:
    """What one app instance holds: one database, and on it the store, the registry and the limiter."""

    def __init__(self) -> None:
        settings = Settings()
        self.db = migrated_database(settings.db_path)
        self.store = SqlRunStore(self.db, stale_after=settings.heartbeat_stale, owns_db=False)
        self.registry = JobRegistry(
            runs_dir=Path(tempfile.mkdtemp(prefix="app-live-")), db=self.db,
            limits=LiveLimits(max_concurrent=4, daily_usd=5.0, max_run_usd=2.0), store=self.store,
            stale_after=settings.heartbeat_stale, beat_every=float(os.environ.get("APP_BEAT_EVERY", "0.2")))
        self.limiter = AttemptLimiter(self.db, per_visitor=5, global_limit=50, window=900.0)

    def reserve_many(self, prefix: str, n: int, want: float) -> list[float | None]:
        """`n` threads reserving `want` dollars each at the same moment against a $5 ceiling."""
        barrier = threading.Barrier(n)
        grants: list[float | None] = [None] * n

        def one(i: int) -> None:
            barrier.wait()
            grants[i] = self.registry.ledger.reserve(f"{prefix}-{i}", want, 5.0, 0.01)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return grants

    def handle(self, cmd: dict[str, Any]) -> Any:
        op = cmd["op"]
        reg = self.registry
        if op == "reserve_many":
            return self.reserve_many(cmd["prefix"], cmd["n"], cmd["want"])
        if op == "today":
            return reg.ledger.today()
        if op == "attempt":
            verdict = self.limiter.attempt(cmd["visitor"], lambda: bool(cmd["right"]))
            return {"ok": verdict.ok, "message": verdict.message}
        if op in ("start", "resume"):
            outcome = reg.start(cmd["question"], cmd["mode"], "quick") if op == "start" else reg.resume(cmd["run_id"])
            if isinstance(outcome, Job):
                return {"run_id": outcome.run_id}
            return {"refused": outcome.reason, "message": outcome.message}
        if op == "progress":
            p = reg.progress(cmd["run_id"])
            return p.model_dump(mode="json") if p is not None else None
        if op == "result":
            rr = reg.result(cmd["run_id"])
            return rr.model_dump(mode="json") if rr is not None else None
        if op == "wait":
            return reg.wait(cmd["run_id"], timeout=cmd.get("timeout", 60))
        if op == "interrupted":
            return [row.run_id for row in reg.interrupted()]
        if op == "running":
            return reg.running()
        raise ValueError(f"unknown op {op!r}")


def main() -> None:
    app = App()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = {"ok": app.handle(json.loads(line))}
        except Exception as e:  # the test reads the error; the process stays up for the next command
            answer = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
