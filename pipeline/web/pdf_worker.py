"""Child process for extract_pdf: PDF bytes on stdin -> one JSON object on stdout.

The object is {ok: true, title, text, published, pages, truncated, reason, page_starts, warnings, image_pages,
ocr_pages, ocr} or {ok: false, error}; `reason` says why the text stops early (the page limit, or the CPU budget and
the page where it ran out), null when it does not. A page with no text layer but images is read by OCR when Debian's
tesseract-ocr is installed (and RESEARCH_OCR is not "off"): `ocr_pages` lists those pages, `ocr` says OCR was on.

Run as `python -m pipeline.web.pdf_worker --max-pages N --max-memory-mb M --cpu-seconds S --page-cpu-seconds P`.
The limits are set here, in the child, before pypdf is imported: setting them from the parent (preexec_fn) is
unsafe when the parent runs threads, and the agent's workers do.

Time is counted in CPU seconds of this process, not wall-clock seconds, so a loaded machine does not cut a
document short: opening the PDF and each page run under a CPU timer (ITIMER_PROF) set to what is left of the
budget, at most P for one page; when it fires, reading stops at that page and the pages before it are returned,
marked truncated with the reason. RLIMIT_CPU, a little above S, ends the process should the timer's exception
never surface (a long call into C); the parent's wall-clock timeout is the last backstop.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

_PDF_DATE = re.compile(r"^D?:?(\d{4})(\d{2})?(\d{2})?")
# Wall time for tesseract on one page's images: it runs as a child of this process, outside this process's CPU timer
# (RLIMIT_CPU and RLIMIT_AS are inherited, so it is bounded all the same).
OCR_SECONDS = 60.0
_GRACE_SECONDS = 2  # CPU time past the budget before RLIMIT_CPU ends the process: enough to write the answer


class _OutOfTime(BaseException):
    """The CPU timer fired. A BaseException, so pypdf's own `except Exception` cannot swallow it mid-page."""


def _limit(max_memory_mb: int, cpu_seconds: float) -> None:
    try:
        import resource
    except ImportError:  # not POSIX: the parent's wall-clock timeout still applies
        return
    limit = max_memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if math.isfinite(cpu_seconds):
        cpu = math.ceil(cpu_seconds) + _GRACE_SECONDS
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))


def _on_timer(signum: int, frame: object) -> None:
    raise _OutOfTime


class CpuBudget:
    """CPU seconds for the whole document, spent step by step, enforced by a CPU timer where there is one."""

    def __init__(self, total: float) -> None:
        self.total = total
        self.start = time.process_time()
        # Signal handlers can only be set from the main thread (the worker's only thread).
        self.timer = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()

    def left(self) -> float:
        return self.total - (time.process_time() - self.start)

    @contextmanager
    def step(self, cap: float = math.inf) -> Iterator[None]:
        """Run the block under the CPU timer (what is left, at most `cap`); _OutOfTime when it is spent."""
        allowed = min(self.left(), cap)
        if allowed <= 0:
            raise _OutOfTime
        if not self.timer or math.isinf(allowed):
            started = time.process_time()
            yield
            if time.process_time() - started > allowed:  # no timer: the block ran to its end, over its allowance
                raise _OutOfTime
            return
        previous = signal.signal(signal.SIGPROF, _on_timer)
        signal.setitimer(signal.ITIMER_PROF, allowed)
        try:
            yield
        finally:
            try:
                signal.setitimer(signal.ITIMER_PROF, 0)
            finally:  # even when the timer fires between the block's end and this line
                signal.signal(signal.SIGPROF, previous)


def _pdf_date(value: object) -> str | None:
    match = _PDF_DATE.match(str(value or "").strip())
    if not match:
        return None
    year, month, day = match.group(1), match.group(2) or "01", match.group(3) or "01"
    return f"{year}-{month}-{day}" if "01" <= month <= "12" and "01" <= day <= "31" else None


def _one_line(text: str, limit: int = 200) -> str:
    return " ".join(text.split())[:limit]


def extract(data: bytes, max_pages: int, cpu_seconds: float = math.inf,
            page_cpu_seconds: float = math.inf) -> dict[str, object]:
    """Text and metadata of the first `max_pages` pages read within the CPU budget; {ok: false, error} otherwise."""
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, DeprecationError, PdfReadError

    budget = CpuBudget(cpu_seconds)
    texts: list[tuple[int, str]] = []
    warnings: list[str] = []
    image_pages: list[int] = []
    ocr_pages: list[int] = []
    tool = ocr_tool()
    reason = None
    try:
        try:
            with budget.step():
                reader = PdfReader(io.BytesIO(data))
                if reader.is_encrypted:
                    try:
                        opened = bool(reader.decrypt(""))  # many PDFs carry only an owner password; they open with ""
                    except Exception:
                        opened = False
                    if not opened:
                        return {"ok": False, "error": "the PDF is encrypted and needs a password"}
                total = len(reader.pages)
                meta: Mapping[str, object] = reader.metadata or {}
                title = str(meta.get("/Title") or "").strip() or None
                published = _pdf_date(meta.get("/CreationDate"))
        except _OutOfTime:
            return {"ok": False, "error": f"the PDF could not be opened within its CPU budget ({cpu_seconds:g} s)"}
        for i in range(min(total, max_pages)):
            whole = budget.left()
            try:
                with budget.step(page_cpu_seconds):
                    text = _page_text(reader.pages[i], i + 1, warnings, image_pages, ocr_pages, tool)
            except _OutOfTime:  # the page's text, whole or not, is left out: the reason names this page
                spent = (f"that page alone needed more than {page_cpu_seconds:g} s of CPU time"
                         if page_cpu_seconds < whole else f"the document's CPU budget of {cpu_seconds:g} s ran out")
                reason = f"stopped at page {i + 1} of {total}: {spent}"
                break
            if text:
                texts.append((i + 1, text))
    except MemoryError:
        return {"ok": False, "error": "the PDF needed more memory than allowed"}
    except DependencyError as e:  # e.g. an image filter or AES decryption that needs an optional library
        return {"ok": False, "error": _one_line(f"the PDF needs a feature this reader lacks ({e})")}
    except DeprecationError as e:
        return {"ok": False, "error": _one_line(f"the PDF uses a construct this reader no longer supports ({e})")}
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, OSError) as e:
        return {"ok": False, "error": _one_line(f"the PDF is malformed ({type(e).__name__}: {e})")}
    except Exception as e:  # any other failure inside pypdf: named, never a bare exit code
        return {"ok": False, "error": _one_line(f"the PDF could not be read ({type(e).__name__}: {e})")}
    if reason is None and total > max_pages:
        reason = f"read the first {max_pages} of {total} pages (the page limit)"
    starts, at = [], 0
    for page, text in texts:
        starts.append([page, at])
        at += len(text) + len(PAGE_BREAK)
    return {"ok": True, "title": title, "text": PAGE_BREAK.join(t for _, t in texts), "published": published,
            "pages": total, "truncated": reason is not None, "reason": reason, "page_starts": starts,
            "warnings": warnings, "image_pages": image_pages, "ocr_pages": ocr_pages, "ocr": tool is not None}


def ocr_tool() -> str | None:
    """tesseract's path when it is installed and OCR is not turned off (RESEARCH_OCR=off), else None."""
    if os.environ.get("RESEARCH_OCR", "").strip().lower() == "off":
        return None
    return shutil.which("tesseract")


def _page_text(page: Any, number: int, warnings: list[str], image_pages: list[int], ocr_pages: list[int],
               tool: str | None) -> str:
    """One page's text, stripped; a page pypdf fails on costs that page only (a warning names it), and a page
    with no text but an image is read by OCR when tesseract is there (noted), else noted as needing it."""
    try:
        text = (page.extract_text() or "").strip()
    except MemoryError:
        raise
    except Exception as e:  # a library's failure on one page's odd content: that page is left out, named
        warnings.append(_one_line(f"page {number} could not be read ({type(e).__name__}: {e})"))
        return ""
    if text or not _has_images(page):
        return text
    if tool is None:
        image_pages.append(number)
        warnings.append(f"page {number} has no text layer (a scanned image?); OCR (tesseract-ocr) is not run")
        return ""
    text = _ocr(page, tool)
    if text:
        ocr_pages.append(number)
        warnings.append(f"page {number} is a scanned image: its text was read by OCR (tesseract)")
    else:
        image_pages.append(number)
        warnings.append(f"page {number} has no text layer, and OCR (tesseract) read no text in its images")
    return text


def _ocr(page: Any, tool: str) -> str:
    """The text tesseract reads in a page's images, in their order; "" when it reads none (or cannot run)."""
    read = []
    with tempfile.TemporaryDirectory(prefix="verbatim-ocr-") as tmp:
        for k, image in enumerate(page.images):
            path = os.path.join(tmp, f"{k}.png")
            try:
                image.image.save(path, format="PNG")  # decoded here, under this process's CPU and memory limits
                done = subprocess.run([tool, path, "stdout"], stdin=subprocess.DEVNULL, capture_output=True,
                                      timeout=OCR_SECONDS, check=False)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                continue
            if done.returncode == 0:
                read.append(done.stdout.decode("utf-8", "replace").replace("\f", "\n").strip())
    return "\n".join(t for t in read if t)


def _has_images(page: Any) -> bool:
    try:
        objects = page["/Resources"].get_object()["/XObject"].get_object()
        return any(str(o.get_object().get("/Subtype")) == "/Image" for o in objects.values())
    except Exception:  # odd resources: not worth failing the page over a note
        return False


PAGE_BREAK = "\n\n"  # between the pages' texts; extract.pdf_extracted splits on the page starts, not on this


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-pages", type=int, default=200)
    parser.add_argument("--max-memory-mb", type=int, default=512)
    parser.add_argument("--cpu-seconds", type=float, default=30, help="CPU time for the whole document")
    parser.add_argument("--page-cpu-seconds", type=float, default=None, help="CPU time for one page (default: all)")
    args = parser.parse_args(argv)
    data = sys.stdin.buffer.read()
    _limit(args.max_memory_mb, args.cpu_seconds)
    page_budget = args.page_cpu_seconds if args.page_cpu_seconds is not None else args.cpu_seconds
    try:
        answer = extract(data, args.max_pages, args.cpu_seconds, page_budget)
    except MemoryError:
        answer = {"ok": False, "error": "the PDF needed more memory than allowed"}
    sys.stdout.write(json.dumps(answer, ensure_ascii=False))
    sys.stdout.flush()
    return 0 if answer.get("ok") else 2


if __name__ == "__main__":
    sys.exit(main())
