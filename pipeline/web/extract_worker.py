"""A long-lived extraction worker: reads Documents from stdin, answers each with one JSON line on stdout.

Run as `python -m pipeline.web.extract_worker --max-memory-mb M` by pipeline/web/workers.py. Framing: the worker
first writes {"ready": true, "pid": N} once its imports are done; then, for each task, it reads one JSON line
(the Document without its body, plus "size" and the task's budgets) followed by exactly "size" body bytes, and
writes {"ok": true, title, text, published, truncated, reason, cpu, and for documents pages, headings and
warnings when there are any} or {"ok": false, "kind": "unreadable" |
"too_slow" | "memory", "error", cpu}. After a "too_slow" or "memory" answer it exits: the library was stopped
mid-call and its state is not trusted; the pool starts a fresh worker.

Budgets, all set here in the child (setting them from a threaded parent is unsafe):
- CPU: each HTML or text task runs under a CPU timer (ITIMER_PROF, via pdf_worker.CpuBudget); a PDF spends its own
  budget page by page inside pdf_worker.extract. RLIMIT_CPU's soft limit moves with each task to the CPU used so
  far plus the task's budget and a grace, so a long call into C that never lets the timer's exception surface
  ends the process (SIGXCPU), which the pool reports as too slow.
- Memory: RLIMIT_AS for the whole process, set once.
- Output: the text is capped (documents.MAX_TEXT_CHARS) and marked truncated.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time
from typing import Any, BinaryIO

from pipeline.web.documents import PDF_MAX_PAGES, Document, read_document
from pipeline.web.extract import ExtractionError
from pipeline.web.pdf_worker import CpuBudget, _OutOfTime

GRACE_SECONDS = 3  # CPU time past a task's budget before RLIMIT_CPU ends the process


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _limit_cpu(budget: float) -> None:
    soft = math.ceil(_cpu_used() + budget + GRACE_SECONDS)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def run_task(header: dict[str, Any], body: bytes) -> dict[str, Any]:
    """One task's answer; "retire" is set when the worker must exit after sending it."""
    started = time.process_time()
    doc = Document(kind=header["kind"], body=body, url=header["url"], charset=header.get("charset"),
                   truncated=bool(header.get("truncated")), outline=bool(header.get("outline")))
    cpu = float(header["cpu_seconds"])
    pdf_cpu, pdf_page_cpu = float(header["pdf_cpu_seconds"]), float(header["pdf_page_cpu_seconds"])
    _limit_cpu(pdf_cpu + cpu if doc.kind == "pdf" else cpu)
    answer: dict[str, Any]
    try:
        if doc.kind == "pdf":  # the PDF reader keeps its own timer, page by page
            got = read_document(doc, pdf_cpu_seconds=pdf_cpu, pdf_page_cpu_seconds=pdf_page_cpu,
                                max_text_chars=int(header["max_text_chars"]),
                                pdf_max_pages=int(header.get("pdf_max_pages") or PDF_MAX_PAGES))
        else:
            with CpuBudget(cpu).step():
                got = read_document(doc, max_text_chars=int(header["max_text_chars"]))
        answer = {"ok": True, "title": got.title, "text": got.text, "published": got.published,
                  "truncated": got.truncated, "reason": got.truncated_reason,
                  **got.model_dump(include={"pages", "headings", "warnings"}, exclude_defaults=True)}
    except _OutOfTime:
        answer = {"ok": False, "kind": "too_slow", "error": f"the page needed more than {cpu:g} s of CPU to read",
                  "retire": True}
    except MemoryError:
        answer = {"ok": False, "kind": "memory", "error": "the page needed more memory than a worker may use",
                  "retire": True}
    except ExtractionError as e:
        answer = {"ok": False, "kind": "unreadable", "error": str(e)}
    except RecursionError:
        answer = {"ok": False, "kind": "unreadable", "error": "the page is nested too deeply to read"}
    except Exception as e:  # a library's bug on odd input costs this page, named, never the worker's loop
        answer = {"ok": False, "kind": "unreadable",
                  "error": " ".join(f"the reader failed on this page ({type(e).__name__}: {e})".split())[:200]}
    answer["cpu"] = round(time.process_time() - started, 4)
    return answer


def serve(stdin: BinaryIO, stdout: BinaryIO) -> int:
    """Answer tasks until stdin closes (the pool is gone) or a task leaves the worker untrusted."""
    stdout.write(json.dumps({"ready": True, "pid": os.getpid()}).encode() + b"\n")
    stdout.flush()
    while line := stdin.readline():
        header = json.loads(line)
        body = stdin.read(int(header["size"]))
        try:
            answer = run_task(header, body)
        except MemoryError:
            answer = {"ok": False, "kind": "memory", "error": "the page needed more memory than a worker may use",
                      "retire": True}
        retire = bool(answer.pop("retire", False))
        try:
            stdout.write(json.dumps(answer, ensure_ascii=False).encode("utf-8", "replace") + b"\n")
            stdout.flush()
        except BrokenPipeError:
            return 0
        if retire:
            return 3
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-memory-mb", type=int, default=1024)
    args = parser.parse_args(argv)
    limit = args.max_memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    sys.exit(main())
