"""The PDF worker's CPU budget: reading stops at the page where the budget is spent, and what was read comes
back marked truncated with the reason. No assertion depends on how fast this machine is: the expensive page costs
seconds of CPU, the budgets are a small fraction of that, and the cheap pages cost milliseconds."""
from __future__ import annotations

import time

import pytest
from test_extract import REPORT, make_pdf  # the PDF builder of the extraction tests (tests/ is on the path)

from pipeline.web import pdf_worker
from pipeline.web.extract import ExtractionError, extract_pdf

# Page 2 is a text stream of 40,000 lines: pypdf needs seconds of CPU for it (about 3 s here), page 1 and 3 ms.
HEAVY = make_pdf([["Page one says revenue rose by 12 percent."],
                  [f"Line {i} of the appendix table." for i in range(40_000)],
                  ["Page three is the summary."]])


def test_a_page_over_its_own_cpu_budget_ends_the_read_there() -> None:
    got = extract_pdf(HEAVY, cpu_seconds=30, page_cpu_seconds=0.2)
    assert got.text == "Page one says revenue rose by 12 percent."
    assert got.truncated
    assert got.truncated_reason == "stopped at page 2 of 3: that page alone needed more than 0.2 s of CPU time"


def test_the_document_budget_ends_the_read_at_the_page_where_it_runs_out() -> None:
    got = extract_pdf(HEAVY, cpu_seconds=0.3, page_cpu_seconds=30)
    assert got.text == "Page one says revenue rose by 12 percent."
    assert got.truncated
    assert got.truncated_reason == "stopped at page 2 of 3: the document's CPU budget of 0.3 s ran out"


def test_a_budget_spent_before_any_text_is_an_error_that_says_so() -> None:
    heavy_first = make_pdf([[f"Line {i} of the appendix table." for i in range(40_000)], ["Page two."]])
    with pytest.raises(ExtractionError, match=r"no text before .*\(stopped at page 1 of 2: that page alone"):
        extract_pdf(heavy_first, page_cpu_seconds=0.2)


def test_a_document_within_its_budget_is_whole_and_the_page_limit_is_still_a_reason() -> None:
    whole = extract_pdf(REPORT, cpu_seconds=30, page_cpu_seconds=10)
    assert not whole.truncated and whole.truncated_reason is None and "appendix" in whole.text
    cut = extract_pdf(REPORT, max_pages=2)
    assert cut.truncated and cut.truncated_reason == "read the first 2 of 3 pages (the page limit)"


def burn(seconds: float) -> None:
    """Use `seconds` of CPU time, however long that takes on the wall clock."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_the_cpu_timer_interrupts_a_page_and_is_disarmed_after() -> None:
    budget = pdf_worker.CpuBudget(total=30)
    with pytest.raises(pdf_worker._OutOfTime), budget.step(0.05):
        burn(5)  # a page a hundred times over its allowance; without the timer the step would end normally
    with budget.step(0.05):
        pass  # a new step gets a new allowance
    assert pdf_worker.signal.getitimer(pdf_worker.signal.ITIMER_PROF) == (0.0, 0.0)


def test_a_library_that_catches_every_exception_cannot_swallow_the_timer() -> None:
    def swallowing_page() -> None:  # pypdf recovers from many errors with `except Exception`
        for _ in range(50):
            try:
                burn(0.02)
            except Exception:
                pass

    with pytest.raises(pdf_worker._OutOfTime), pdf_worker.CpuBudget(total=30).step(0.05):
        swallowing_page()


def test_the_budget_is_checked_after_each_page_where_there_is_no_cpu_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without setitimer (not POSIX) a page runs to its end; over its allowance, it ends the read all the same.
    monkeypatch.delattr(pdf_worker.signal, "setitimer")
    budget = pdf_worker.CpuBudget(total=0.05)
    with pytest.raises(pdf_worker._OutOfTime), budget.step():
        burn(0.1)
    with pytest.raises(pdf_worker._OutOfTime), budget.step():  # spent: the next page does not start
        pass


def test_without_a_cpu_timer_a_page_over_its_allowance_still_ends_the_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(pdf_worker.signal, "setitimer")
    answer = pdf_worker.extract(HEAVY, max_pages=10, cpu_seconds=30, page_cpu_seconds=0.2)
    assert answer["ok"] and answer["truncated"] and answer["text"] == "Page one says revenue rose by 12 percent."
    assert answer["reason"] == "stopped at page 2 of 3: that page alone needed more than 0.2 s of CPU time"
