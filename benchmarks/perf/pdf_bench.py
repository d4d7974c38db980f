"""PDF outcomes by kind: what extract_pdf returns (text, truncated with its reason, or the refusal) and how long.

Usage: python benchmarks/perf/pdf_bench.py
Each kind is a PDF built here with pypdf (tests/test_extract.py's builder): a plain report, one longer than the
page limit, one with a page that costs seconds of CPU (read under a 1 s page budget), glyph-name gibberish, an
encrypted one (RC4, and AES-256 with an empty user password), a truncated file, a file that is not a PDF, and a
page with no text layer.
"""
from __future__ import annotations

import io
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from pypdf import PdfReader, PdfWriter  # noqa: E402
from test_extract import REPORT, make_pdf  # noqa: E402

from pipeline.web.extract import ExtractionError, extract_pdf  # noqa: E402


def _encrypted(algorithm: str, user: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(REPORT)))
    writer.encrypt(user_password=user, owner_password="owner", algorithm=algorithm)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _blank() -> bytes:
    writer = PdfWriter()
    writer.add_blank_page(612, 792)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


KINDS: dict[str, tuple[bytes, dict[str, float]]] = {
    "plain report (3 pages)": (REPORT, {}),
    "over the page limit (limit 2)": (REPORT, {"max_pages": 2}),
    "a page costing seconds of CPU": (make_pdf([["Page one says revenue rose by 12 percent."],
                                                [f"Line {i} of the appendix." for i in range(40_000)],
                                                ["Page three."]]), {"page_cpu_seconds": 1.0}),
    "glyph names, no Unicode map": (make_pdf([["/G21 /G22 /G23 g0041 g0042 g0043", "(cid:12) (cid:13) /uni0041"]]), {}),
    "encrypted, RC4, needs a password": (_encrypted("RC4-128", "secret"), {}),
    "encrypted, AES-256, empty password": (_encrypted("AES-256", ""), {}),
    "cut off mid-file": (REPORT[: len(REPORT) // 2], {}),
    "not a PDF": (b"<html>not a pdf</html>", {}),
    "no text layer (a blank page)": (_blank(), {}),
}


def main() -> None:
    print(f"{'kind':<38}{'ms':>8}  outcome")
    for kind, (data, options) in KINDS.items():
        started = time.monotonic()
        try:
            got = extract_pdf(data, **options)  # type: ignore[arg-type]
            cut = f", truncated: {got.truncated_reason}" if got.truncated else ""
            outcome = f"text, {len(got.text)} chars{cut}"
        except ExtractionError as e:
            outcome = f"refused: {e}"
        print(f"{kind:<38}{(time.monotonic() - started) * 1000:>8.0f}  {outcome}")


if __name__ == "__main__":
    main()
