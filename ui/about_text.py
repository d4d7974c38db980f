"""The About page's text (ours, trusted Markdown)."""

ABOUT = """
Verbatim answers a question with a short report in which **every claim cites a finding**, and **every finding is a
verbatim quote that code located in the text of a page the program fetched** during that run. Gaps are named,
conflicts are shown both ways, and a hard budget bounds every run.

### How a run works

1. **Plan.** The lead model splits the question into one to four sub-questions, each with a success criterion,
   two or three search queries, and a checkable proxy for any vague term ("most popular" becomes, say,
   "most GitHub stars"; the proxy is named in the report's label). A question built on a false premise gets a
   sub-question that tests the premise. The planner never sees page text.
2. **Research**, in one of two modes:
   - *fixed*: code runs the planned queries, ranks the results (one page per site first) and fetches the top
     pages. No model chooses what to read: cheap and predictable.
   - *tools*: one worker per sub-question, in parallel, with `web_search`, `fetch_page`, `find_in_page`,
     `record_finding` and `calculate`, all sharing one budget and one notebook.
3. **Analyse.** Proposed findings are kept only if their quote is found in the fetched page's text (allowing
   for curly quotes, spacing, dashes and similar, never for a changed word, number or "not"). A support judge
   then rates, in a fresh context, whether each quote supports its claim; unsupported findings are dropped.
   Conflicting figures are found in code; sub-questions with no supported finding become named gaps.
4. **Write.** The writer sees only the verified findings (claim, quote, source title and date), never the pages,
   and must end every sentence with the ids it rests on. Code appends the Sources list.
5. **Review.** Code checks every sentence (it cites, the ids exist, its numbers appear in the cited quotes, no
   address that was not fetched, every gap named); then a judge reads each sentence against its quotes. The
   writer revises at most twice; whatever is still wrong is shown under the report.

A third mode, *extractive*, uses **no model at all** and needs no key: code splits the question, runs the fixed
researcher, picks the sentences of the fetched pages that best match each sub-question, and quotes them verbatim in
a template, one paragraph per sub-question; the same notebook and code checks apply. It costs nothing, and it is the
floor that model runs must beat. The pages label these runs "no model".

### What the checks prove

- Each quote in a report **appears in the page text the program fetched**, at the recorded position, from the
  address shown. A model cannot invent a quote and have it kept.
- Every sentence of the body **cites** something, every cited id **exists**, and every number in a sentence
  **appears in a quote it cites** (or in a calculation done in code).
- Nothing beyond the budget was spent: searches, fetches, model calls, tokens and dollars are counted in code
  before each call.
- Page text was handled as data: wrapped in markers the page cannot close, never followed as instructions, and
  never shown here as live HTML (no scripts, images or remote content; links go only to fetched sources).

### What they do not prove

- **That the source is right.** A verbatim quote from a wrong, outdated or biased page is still wrong.
- **That a sentence reads its quote fairly.** That is judged by a model, which can err; the *support* rating and
  any problem left are shown so you can check.
- **That the page still says it.** Pages change; the link opens the page as it is now, scrolled to the passage
  where the browser can find it.
- **That nothing important was missed.** Coverage is limited to what the searches found and the budget allowed;
  gaps are named, but an unknown unknown is not.
- The label *machine-assisted* is meant: read the quotes before relying on a report.

### This app

- **Benchmarks** lists saved runs (the JSON files under `benchmark_runs/`), with cost, coverage and time, and
  compares the modes.
- **Report** shows one run; its address (`/report?run=<run id>`) is a shareable link. Click any `[F1]`-style
  citation to see the quote, the source's title and date, and a link that opens the source at that passage.
- **Live research** runs new questions for visitors who have the access code, within server-wide limits on
  concurrent runs and on dollars spent per day. A server with no model key offers only the extractive mode.
"""
