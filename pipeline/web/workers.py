"""The extraction pool: every page, text and PDF is read in a worker process under a CPU, memory and output budget.

Mechanism: long-lived workers (`python -m pipeline.web.extract_worker`), one per core (at most MAX_WORKERS),
started when first needed and replaced when one dies or overruns. Chosen over ProcessPoolExecutor because a task
must be able to kill its own worker: an executor has no way to stop one task that will not return, and a worker
that dies breaks the whole executor. A fresh interpreter per page (spawn) would pay the import of trafilatura and
lxml (about 0.4 s of CPU, measured by benchmarks/perf/workers_bench.py) on every page; a worker pays it once.

A task that runs past its budget gets a named refusal ("too_slow: ..."), never a hang: the worker's CPU timer
ends the task, its RLIMIT_CPU ends the worker, and the wall-clock deadline here (generous) kills it. An HTML or
text page that was too slow is read again from its first bytes, once, and kept marked truncated: the article is
at the top of the page. Pages are read in parallel across workers; a caller waits only for a free worker.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from pipeline.web.documents import MAX_TEXT_CHARS, PDF_MAX_PAGES, Document
from pipeline.web.extract import Extracted, ExtractionError, TooCostly, child_env

MAX_WORKERS = 4
START_TIMEOUT = 60.0  # wall seconds for a worker's imports, on a machine that may be busy
PREFIX_MIN_BYTES = 200_000  # a too-slow page is read again from its first max(this, size / PREFIX_SHARE) bytes
PREFIX_SHARE = 8


@dataclass(frozen=True)
class Limits:
    """What one task may cost. CPU seconds, not wall seconds: a busy machine does not cut a page short."""

    cpu_seconds: float = 8.0  # an HTML or text page
    pdf_cpu_seconds: float = 20.0  # a whole PDF
    pdf_page_cpu_seconds: float = 5.0  # one page of a PDF
    max_memory_mb: int = 1024  # a worker's address space
    max_text_chars: int = MAX_TEXT_CHARS
    pdf_max_pages: int = PDF_MAX_PAGES

    def wall_seconds(self, doc: Document, cpu: float) -> float:
        """The wall-clock backstop for a task: only a stuck or starved worker reaches it."""
        return 3 * (cpu + (self.pdf_cpu_seconds if doc.kind == "pdf" else 0)) + 10


class _Dead(Exception):
    """The worker's pipe closed: it exited or was killed."""


class _Overdue(Exception):
    """The wall-clock deadline passed; the worker has been killed."""


class _Worker:
    """One worker process and the framing of its pipes."""

    def __init__(self, command: list[str]) -> None:
        started = time.monotonic()
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=child_env(), bufsize=0)
        self._buffer = b""
        try:
            hello = json.loads(self._line(started + START_TIMEOUT))
        except (_Dead, _Overdue, ValueError):
            self.kill()
            raise ExtractionError("no extraction worker could be started (python -m pipeline.web.extract_worker "
                                  f"exited with {self.proc.returncode}); check the installation") from None
        self.pid = int(hello["pid"])
        self.startup_seconds = time.monotonic() - started

    def ask(self, header: dict[str, Any], body: bytes, deadline: float) -> dict[str, Any]:
        """Send one task, return its answer; _Dead or _Overdue when the worker does not answer."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(header).encode() + b"\n" + body)
            self.proc.stdin.flush()
        except OSError:  # the worker is gone (BrokenPipeError) before it read the task
            raise _Dead from None
        answer: dict[str, Any] = json.loads(self._line(deadline))
        return answer

    def _line(self, deadline: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise _Overdue
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    self.proc.wait()
                    raise _Dead
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        """Ask the worker to exit (end of its input); kill it if it does not within a second."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=1)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()


def default_size() -> int:
    """One worker per core this process may run on, at most MAX_WORKERS."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(MAX_WORKERS, cores))


class WorkerPool:
    """Reads Documents in worker processes, at most `size` at once; safe to share between threads."""

    def __init__(self, size: int | None = None, limits: Limits | None = None) -> None:
        self.size = size or default_size()
        self.limits = limits or Limits()
        self.started = 0  # workers started so far (a replaced worker counts again)
        self.startup_seconds: list[float] = []
        self._command = [sys.executable, "-m", "pipeline.web.extract_worker",
                         "--max-memory-mb", str(self.limits.max_memory_mb)]
        self._slots = threading.BoundedSemaphore(self.size)
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()

    def read(self, doc: Document, costs: list[float] | None = None, *, limits: Limits | None = None) -> Extracted:
        """Title, text and date of `doc`; ExtractionError (TooCostly past a budget) with a one-line reason.

        `costs`, when given, gets the CPU seconds each task took in its worker; `limits` replace the pool's own for
        this task (but not its memory limit, which is the worker's).
        """
        limits = limits or self.limits
        try:
            return self._read(doc, limits.cpu_seconds, costs, limits)
        except TooCostly as slow:
            size = len(doc.body)
            cut = max(PREFIX_MIN_BYTES, size // PREFIX_SHARE)
            if doc.kind == "pdf" or not str(slow).startswith("too_slow") or cut >= size:
                raise
            prefix = doc.model_copy(update={"body": doc.body[:cut], "truncated": True})
            try:
                got = self._read(prefix, limits.cpu_seconds / 2, costs, limits)
            except ExtractionError:
                raise slow from None
            return got.model_copy(update={"truncated": True, "truncated_reason": (
                f"read the first {cut:,} of {size:,} bytes: the whole page needed more than "
                f"{limits.cpu_seconds:g} s of CPU")})

    def busy_pids(self) -> list[int]:
        """Process ids of the workers reading a page now (for fault tests and diagnostics)."""
        with self._lock:
            return [w.pid for w in self._busy]

    def close(self) -> None:
        """Stop the idle workers; busy ones stop when their task ends (their input is closed then)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()

    def _read(self, doc: Document, cpu: float, costs: list[float] | None, limits: Limits) -> Extracted:
        header = {"kind": doc.kind, "url": doc.url, "charset": doc.charset, "truncated": doc.truncated,
                  "size": len(doc.body), "cpu_seconds": cpu, "pdf_cpu_seconds": limits.pdf_cpu_seconds,
                  "pdf_page_cpu_seconds": limits.pdf_page_cpu_seconds, "max_text_chars": limits.max_text_chars,
                  "outline": doc.outline, "pdf_max_pages": limits.pdf_max_pages}
        answer = self._ask(header, doc.body, limits.wall_seconds(doc, cpu))
        if costs is not None and "cpu" in answer:
            costs.append(float(answer["cpu"]))
        if answer.get("ok"):
            return Extracted(title=answer.get("title"), text=answer["text"], published=answer.get("published"),
                             truncated=bool(answer.get("truncated")), truncated_reason=answer.get("reason"),
                             pages=answer.get("pages") or [], headings=answer.get("headings") or [],
                             warnings=answer.get("warnings") or [])
        if answer.get("kind") == "too_slow":
            raise TooCostly(f"too_slow: {answer['error']}")
        if answer.get("kind") == "memory":
            raise TooCostly(f"{answer['error']} ({self.limits.max_memory_mb} MB)")
        raise ExtractionError(str(answer.get("error") or "the page could not be read"))

    def _ask(self, header: dict[str, Any], body: bytes, wall: float) -> dict[str, Any]:
        with self._slots:
            worker = self._take()
            healthy = False
            try:
                answer = worker.ask(header, body, time.monotonic() + wall)
                healthy = answer.get("kind") not in ("too_slow", "memory")
                return answer
            except _Overdue:
                return {"ok": False, "kind": "too_slow",
                        "error": f"the page was not read within {wall:g} s and its worker was stopped"}
            except _Dead:
                code = worker.proc.returncode
                if code == -getattr(signal, "SIGXCPU", 24):
                    return {"ok": False, "kind": "too_slow",
                            "error": f"the page needed more than {header['cpu_seconds']:g} s of CPU to read"}
                return {"ok": False, "kind": "unreadable",
                        "error": f"the extraction worker stopped while reading the page ({_exit(code)})"}
            finally:
                self._give(worker, healthy)

    def _take(self) -> _Worker:
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is None or worker.proc.poll() is not None:
            worker = _Worker(self._command)
            with self._lock:
                self.started += 1
                self.startup_seconds.append(worker.startup_seconds)
        with self._lock:
            self._busy.add(worker)
        return worker

    def _give(self, worker: _Worker, healthy: bool) -> None:
        with self._lock:
            self._busy.discard(worker)
            if healthy and worker.proc.poll() is None:
                self._idle.append(worker)
                return
        if worker.proc.poll() is None:
            worker.kill()


def _exit(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


_DEFAULT: WorkerPool | None = None
_DEFAULT_LOCK = threading.Lock()


def default_pool() -> WorkerPool:
    """The process's one pool, made on first use and stopped at exit."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = WorkerPool()
            atexit.register(_DEFAULT.close)
        return _DEFAULT


def read_in_worker(doc: Document) -> Extracted:
    """`doc` read by the default pool: the production Extractor of fetch.py and corpus.py."""
    return default_pool().read(doc)
