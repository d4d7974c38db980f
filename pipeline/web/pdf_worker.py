"""Child process for extract_pdf: PDF bytes on stdin -> one JSON object on stdout.

The object is {ok: true, title, text, published, pages, truncated} or {ok: false, error}.

Run as `python -m pipeline.web.pdf_worker --max-pages N --max-memory-mb M --cpu-seconds S`. The limits are
set here, in the child, before pypdf is imported: setting them from the parent (preexec_fn) is unsafe
when the parent runs threads, and the agent's workers do.
"""
from __future__ import annotations

import argparse
import io
import json
import re
import sys
from collections.abc import Mapping

_PDF_DATE = re.compile(r"^D?:?(\d{4})(\d{2})?(\d{2})?")


def _limit(max_memory_mb: int, cpu_seconds: int) -> None:
    try:
        import resource
    except ImportError:  # not POSIX: the parent's wall-clock timeout still applies
        return
    limit = max_memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))


def _pdf_date(value: object) -> str | None:
    match = _PDF_DATE.match(str(value or "").strip())
    if not match:
        return None
    year, month, day = match.group(1), match.group(2) or "01", match.group(3) or "01"
    return f"{year}-{month}-{day}" if "01" <= month <= "12" and "01" <= day <= "31" else None


def _one_line(text: str, limit: int = 200) -> str:
    return " ".join(text.split())[:limit]


def extract(data: bytes, max_pages: int) -> dict[str, object]:
    """Text and metadata of the first `max_pages` pages; an {ok: false, error} dict for a PDF we cannot read."""
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, DeprecationError, PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                opened = bool(reader.decrypt(""))  # many PDFs carry only an owner password; they open with ""
            except Exception:
                opened = False
            if not opened:
                return {"ok": False, "error": "the PDF is encrypted and needs a password"}
        total = len(reader.pages)
        texts = [(reader.pages[i].extract_text() or "").strip() for i in range(min(total, max_pages))]
        meta: Mapping[str, object] = reader.metadata or {}
        title = str(meta.get("/Title") or "").strip() or None
        published = _pdf_date(meta.get("/CreationDate"))
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
    return {"ok": True, "title": title, "text": "\n\n".join(t for t in texts if t), "published": published,
            "pages": total, "truncated": total > max_pages}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-pages", type=int, default=200)
    parser.add_argument("--max-memory-mb", type=int, default=512)
    parser.add_argument("--cpu-seconds", type=int, default=30)
    args = parser.parse_args(argv)
    data = sys.stdin.buffer.read()
    _limit(args.max_memory_mb, args.cpu_seconds)
    try:
        answer = extract(data, args.max_pages)
    except MemoryError:
        answer = {"ok": False, "error": "the PDF needed more memory than allowed"}
    sys.stdout.write(json.dumps(answer, ensure_ascii=False))
    sys.stdout.flush()
    return 0 if answer.get("ok") else 2


if __name__ == "__main__":
    sys.exit(main())
