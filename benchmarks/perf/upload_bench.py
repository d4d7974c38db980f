"""Upload-to-first-finding time of the Live research page: a 50-page PDF uploaded in headless Chromium, then researched.

    .venv/bin/python benchmarks/perf/upload_bench.py [--pages 50] [--answer-page 37] [--repeat 3] [--json out.json]

Starts `streamlit run app.py` on a loopback port (a temporary RESEARCH_DB and RESEARCH_CACHE_DIR, ACCESS_CODE set, no
ANTHROPIC_API_KEY so only the extractive mode runs, RESEARCH_SEARCH_PROVIDER unset so only the documents are
searched), generates a PDF of `--pages` pages of report filler (about 40 lines a page, tests/fakes/documents.py) with
the answer sentence on `--answer-page`, and `--repeat` times, each in a new browser context: opens /live, unlocks it
with the code, sets the file input to the PDF, asks the question and clicks "Start research". It times
(a) upload: set_input_files to the file shown as uploaded (its chip's "Remove" button);
(b) first finding: the Start click to the progress view's "Findings saved" metric first >= 1, or "Finished:",
    whichever comes first (the progress fragment polls each second, so a fast run may show only "Finished:");
(c) finished: the Start click to "Finished:"; also to the run's page (`?run=`: the files staged and indexed).
Prints the median and max of each, the PDF's size and pages, and the server's memory (and its extraction workers')
after the runs. Needs the playwright package and /usr/bin/chromium; no network and no keys are used.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.perf import browser  # noqa: E402
from benchmarks.perf.page_cost_bench import server  # noqa: E402
from benchmarks.perf.procstat import memory_kb  # noqa: E402
from tests.fakes.documents import pdf_bytes  # noqa: E402

CODE = "upload-bench-access-code"
NAME = "annual review 2023.pdf"
QUESTION = "What was the reactor output in March 2023?"
ANSWER = "The reactor output rose to 41 megawatts in March 2023."
TIMEOUT_MS = 300_000
SUBJECTS = ["The maintenance team", "Plant management", "The safety committee", "Operations staff", "The board",
            "Contractors", "The finance office", "Site engineers", "The regulator", "Quality assurance"]
VERBS = ["reviewed", "completed", "inspected", "approved", "documented", "scheduled", "audited", "replaced"]
OBJECTS = ["the cooling water pumps", "the annual training plan", "the turbine hall lighting", "the spare parts stock",
           "the fire doors on level two", "the staff rota", "the capital budget", "the emergency procedures",
           "the feedwater valves", "the control room software", "the switchyard fencing", "the visitor centre"]
WHEN = ["in January", "in the second quarter", "before the summer outage", "during the autumn", "late in the year",
        "on schedule", "ahead of plan", "with minor delays"]
# The page the progress view is in: findings so far, the finished message, and whether the run's page is shown.
STATE_JS = """() => {
  const text = document.body.innerText;
  let findings = null;
  for (const m of document.querySelectorAll('[data-testid="stMetric"]')) {
    if ((m.querySelector('[data-testid="stMetricLabel"]')?.innerText || '').includes('Findings saved'))
      findings = parseInt(m.querySelector('[data-testid="stMetricValue"]')?.innerText || '', 10);
  }
  return {run: location.search.includes('run='), findings: Number.isNaN(findings) ? null : findings,
          finished: text.includes('Finished:')};
}"""


def filler_pages(pages: int, answer_page: int, seed: int = 7) -> list[str]:
    """`pages` pages of ~40 lines of annual-report prose; page `answer_page` (1-based) holds ANSWER mid-page."""
    rng = random.Random(seed)
    out = []
    for n in range(1, pages + 1):
        lines = [f"Annual review 2023, section {n}."]
        while len(lines) < 40:
            line = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(WHEN)}."
            lines.append(line if rng.random() < 0.6 else f"{line} Costs were {rng.randint(2, 90)} thousand euros.")
        if n == answer_page:
            lines[20] = ANSWER
        out.append("\n".join(lines))
    return out


def children_kb(pid: int) -> int:
    """Resident KiB of `pid`'s child processes (the extraction workers)."""
    kids = [c for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]
    return sum(memory_kb(int(c)).get("VmRSS", 0) for c in kids if Path(f"/proc/{c}").exists())


def one_run(ctx: Any, url: str, pdf: bytes) -> dict[str, Any]:
    """One visitor: unlock, upload, ask; the seconds of each step and what the finished run showed."""
    page = ctx.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(url) else r.abort())
    page.goto(url + "/live")
    page.get_by_label("Access code").fill(CODE)
    page.get_by_role("button", name="Unlock").click()
    page.get_by_label("Question").wait_for()
    t0 = time.perf_counter()
    page.locator('input[type="file"]').set_input_files([{"name": NAME, "mimeType": "application/pdf", "buffer": pdf}])
    page.get_by_role("button", name=f"Remove {NAME}", exact=True).wait_for()
    upload = time.perf_counter() - t0
    page.get_by_label("Question").fill(QUESTION)
    t0 = time.perf_counter()
    page.get_by_role("button", name="Start research").click()
    seen: dict[str, float] = {}
    while "finished" not in seen:
        s, now = page.evaluate(STATE_JS), time.perf_counter() - t0
        if s["run"]:
            seen.setdefault("run", now)
        if (s["findings"] or 0) >= 1:
            seen.setdefault("findings", now)
        if s["finished"]:
            seen.setdefault("finished", now)
        if now > TIMEOUT_MS / 1000:
            raise RuntimeError(f"no 'Finished:' after {now:.0f} s")
        time.sleep(0.02)
    page.get_by_role("button", name="Ask another question").wait_for()  # the last element: the report is drawn
    message = page.get_by_text("Finished:").first.inner_text()
    answered = page.get_by_text("41 megawatts").count() > 0
    page.close()
    return {"upload_s": round(upload, 3), "run_page_s": round(seen.get("run", seen["finished"]), 3),
            "first_finding_s": round(min(seen.get("findings", seen["finished"]), seen["finished"]), 3),
            "finished_s": round(seen["finished"], 3), "findings_shown_before_finish": "findings" in seen
            and seen["findings"] < seen["finished"], "finished": message.strip(), "answer_in_report": answered}


def measure(pages: int, answer_page: int, repeat: int) -> dict[str, Any]:
    """Every repeat's figures on one server, the PDF's size and the server's memory after them."""
    from playwright.sync_api import sync_playwright

    pdf = pdf_bytes(filler_pages(pages, answer_page), title="Annual review 2023")
    out: dict[str, Any] = {"pdf_bytes": len(pdf), "pages": pages, "answer_page": answer_page, "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = {k: v for k, v in os.environ.items()
               if k not in ("ANTHROPIC_API_KEY", "RESEARCH_SEARCH_PROVIDER", "RESEARCH_DOCS_DIR")}
        env |= {"HOME": str(home), "RESEARCH_DB": str(home / "state" / "research.sqlite"),
                "RESEARCH_CACHE_DIR": str(home / "cache"), "ACCESS_CODE": CODE, "ACCESS_CODE_SECRET": ""}
        argv = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py")]
        with server(argv, ROOT, env) as (url, pid), sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=browser.CHROMIUM, args=browser.ARGS)
            try:
                for _ in range(repeat):
                    ctx = chromium.new_context()
                    try:
                        out["runs"].append(one_run(ctx, url, pdf))
                    finally:
                        ctx.close()
            finally:
                chromium.close()
            out["memory_mb"] = {k: round(v / 1024) for k, v in memory_kb(pid).items()}
            out["memory_mb"]["workers_VmRSS"] = round(children_kb(pid) / 1024)
    for key in ("upload_s", "first_finding_s", "finished_s", "run_page_s"):
        values = [r[key] for r in out["runs"]]
        out[key] = {"median": round(statistics.median(values), 3), "max": max(values)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--pages", type=int, default=50)
    ap.add_argument("--answer-page", type=int, default=37, help="the page (1-based) holding the answer sentence")
    ap.add_argument("--repeat", type=int, default=3, help="uploads, each in a new browser context, on one server")
    ap.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = ap.parse_args()
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        sys.exit("upload_bench: the playwright package is not installed (pip install playwright)")
    if not browser.available():
        sys.exit(f"upload_bench: Chromium is not installed at {browser.CHROMIUM} (apt-get install chromium)")
    out = measure(args.pages, args.answer_page, args.repeat)
    print(f"[pdf] {out['pages']} pages, {out['pdf_bytes'] / 1024:.0f} KB, answer on page {out['answer_page']}")
    for i, r in enumerate(out["runs"], 1):
        print(f"[run {i}] upload {r['upload_s']:.2f} s; start to run page {r['run_page_s']:.2f} s, first finding "
              f"{r['first_finding_s']:.2f} s, finished {r['finished_s']:.2f} s; {r['finished']} "
              f"(answer in report: {'yes' if r['answer_in_report'] else 'no'})")
    labels = (("upload_s", "upload (set_input_files to the file shown as uploaded)"),
              ("run_page_s", "Start click to the run's page (files staged and indexed)"),
              ("first_finding_s", "Start click to first finding ('Findings saved' >= 1 or 'Finished:')"),
              ("finished_s", "Start click to 'Finished:'"))
    for key, label in labels:
        print(f"[{key[:-2]}] {label}: median {out[key]['median']:.2f} s, max {out[key]['max']:.2f} s "
              f"over {len(out['runs'])} runs")
    if not any(r["findings_shown_before_finish"] for r in out["runs"]):
        print("[first_finding] 'Findings saved' never showed >= 1 before 'Finished:': first finding = finished")
    mem = out["memory_mb"]
    print(f"[memory] server after the runs: resident {mem['VmRSS']} MB, peak {mem['VmHWM']} MB; "
          f"its extraction workers {mem['workers_VmRSS']} MB resident")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
