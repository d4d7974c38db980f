"""Live research (gated): unlock with the access code, ask a question, watch the run, read the report; resume a
run whose server instance stopped.

The run itself happens in a background thread of the job registry (ui/jobs.py), which never calls st.*; this page
only reads its progress from the database, polled by a fragment, so any instance can show it. The unlocked state
lives in this session only, never the URL; the run's id is in the URL (`?run=`), so a reload finds it again. Without
a model key only the extractive mode (no model) is offered.
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.uploaded_file_manager import UploadedFile

from pipeline.config import ConfigError
from pipeline.store.base import StoreError
from pipeline.store.timeline import load_timeline
from pipeline.web.docs_index import DocsIndex, Progress
from ui.access import code_matches, reveals_code, visitor_id
from ui.components import md_text, show_report
from ui.jobs import MODES, PRESETS, Job, JobRegistry, preset_label
from ui.library import mode_label
from ui.progress import LiveProgress
from ui.state import access, config, limiter, registry, store, upload_gate
from ui.uploads import ACCEPTED, discard, stage
from ui.views import report_view

UNLOCKED, RUN = "live_unlocked", "run"
UNUSED, UNUSED_NOW = "unused_files", "unused_files_now"  # uploaded files a run left out, with why: by run id

cfg = config()
st.title("Live research")
state = access(cfg)
if not state.enabled:
    st.warning(md_text(state.message), icon=":material/lock:")
    st.stop()

if not st.session_state.get(UNLOCKED):
    st.write("Live runs cost real money, so they are open only to visitors with the access code. Saved reports "
             "on the Benchmarks and Report pages are open to everyone.")
    with st.form("unlock"):
        code = st.text_input("Access code", type="password", key="access_code", max_chars=200)
        submitted = st.form_submit_button("Unlock", icon=":material/lock_open:")
    if submitted:
        visitor = visitor_id(st.context.headers.to_dict(), st.context.ip_address, cfg.trusted_proxies)
        try:
            verdict = limiter(cfg).attempt(visitor, lambda: code_matches(code or "", state))
        except StoreError as e:
            st.error(md_text(f"Live runs are unavailable: {e}"), icon=":material/error:")
            st.stop()
        if verdict.ok:
            st.session_state[UNLOCKED] = True
            st.rerun()
        st.error(md_text(verdict.message), icon=":material/block:")
    st.stop()



def unavailable(e: StoreError) -> None:
    """The database is down or misconfigured: say so (the message names RESEARCH_DB, its password masked) and stop;
    saved reports stay readable on the other pages."""
    st.error(md_text(f"Live runs are unavailable: {e}"), icon=":material/error:")
    st.stop()


def progress_view(p: LiveProgress) -> None:
    """Budget use against the limits, findings so far, recent activity, and a cancel button."""
    st.markdown(f"**Question:** {md_text(p.question)}  \n**Mode:** {md_text(mode_label(p.mode))} · "
                f"**Step:** {md_text(p.step)} · {p.seconds:.0f} s")
    lim = p.limits
    cols = st.columns(4)
    bars = [("Searches", p.searches, lim.searches), ("Fetches", p.fetches, lim.fetches)]
    if p.mode != "extractive":
        bars.append(("Model calls", p.model_calls, lim.model_calls))
    for col, (name, used, cap) in zip(cols, bars, strict=False):
        col.progress(min(1.0, used / cap) if cap else 1.0, text=f"{name}: {used} of {cap}")
    if p.mode == "extractive":
        cols[2].caption("No model: code selects the sentences, so there are no model calls and no cost.")
    else:
        cols[3].progress(min(1.0, p.cost_usd / lim.cost_usd) if lim.cost_usd else 1.0,
                         text=f"Cost: \\${p.cost_usd:.4f} of \\${lim.cost_usd:.2f}")
    m1, m2 = st.columns(2)
    m1.metric("Findings saved", p.findings)
    m2.metric("Quotes rejected", p.rejected)
    if p.recent:
        st.code("\n".join(p.recent), language=None)
    if p.cancel_requested:
        st.info("Cancelling: the run is finishing the call it is in, then it stops and keeps what it gathered.")
    elif st.button("Cancel run", icon=":material/stop_circle:", key="cancel"):
        jobs.cancel(p.run_id)
        st.rerun(scope="fragment")


@st.fragment(run_every=1.0)
def progress_panel(run_id: str) -> None:
    try:  # a fragment reruns on its own, outside the page's guard below
        p = jobs.progress(run_id)
        if p is None or p.status != "running":
            st.rerun()  # the whole page then shows the finished (or interrupted) run
        else:
            progress_view(p)
    except StoreError as e:
        unavailable(e)


def resume_button(run_id: str, key: str) -> None:
    if st.button("Resume", icon=":material/play_arrow:", key=key,
                 help="Continue on this server: finished calls are reused from the record, not repeated or paid "
                      "again; a fresh spend reservation covers what the run's budget has left."):
        outcome = jobs.resume(run_id)
        if isinstance(outcome, Job):
            st.query_params[RUN] = run_id
            st.rerun()
        st.error(md_text(outcome.message), icon=":material/block:")


def live_page() -> None:
    """The run in the URL, else the interrupted runs and the form to start one."""
    run_id = st.query_params.get(RUN) or ""
    shown = jobs.progress(run_id) if run_id else None
    for name, reason in st.session_state.get(UNUSED, {}).get(run_id, []):  # the files this session's run left out
        st.warning(md_text(f"{name} was not used: {reason}"), icon=":material/block:")
    if shown is not None and shown.status == "running":
        st.subheader("Running")
        progress_panel(shown.run_id)
        st.stop()

    if shown is not None:
        rr = jobs.result(run_id)
        if shown.status == "interrupted":
            st.warning(md_text(f"This run stopped when its server instance did ({shown.step}, {shown.findings} "
                               "findings so far). Everything it had done is recorded."),
                       icon=":material/pause_circle:")
            resume_button(shown.run_id, "resume_shown")
        elif rr is None:
            st.error(md_text(shown.error or "The run stopped without a result."), icon=":material/error:")
        else:
            n = len(rr.findings)
            cost = "no model, \\$0" if rr.mode == "extractive" else f"\\${rr.usage.cost_usd:.4f}"
            st.success(f"Finished: {rr.status}, {n} finding{'s' if n != 1 else ''}, {cost}.",
                       icon=":material/check_circle:")
            st.page_link("ui/pages/report.py", label="Open in the report view (shareable link)",
                         icon=":material/article:", query_params={"run": rr.run_id})
            show_report(report_view(rr, load_timeline(rr, cfg.live_dir, store(cfg))), key="live")
        if st.button("Ask another question", icon=":material/add:"):
            st.query_params.pop(RUN, None)
            st.rerun()
        st.stop()

    stopped = jobs.interrupted()
    if stopped:
        with st.expander(f"Interrupted runs ({len(stopped)})", icon=":material/pause_circle:", expanded=True):
            st.caption("These runs stopped when their server instance did. Resuming one continues it here without "
                       "repeating any call it had finished.")
            for row in stopped[:10]:
                left, right = st.columns([5, 1])
                left.markdown(f"**{md_text(row.question)}** · {md_text(mode_label(row.mode))} · `{row.run_id}`")
                with right:
                    resume_button(row.run_id, f"resume_{row.run_id}")

    offer = jobs.offer()
    if offer.problem is not None:
        st.error(md_text(offer.problem), icon=":material/error:")
        st.stop()
    if offer.note is not None:
        st.info(md_text(offer.note), icon=":material/info:")
    if st.session_state.get("mode") not in offer.modes:  # e.g. a model key was removed since this session chose
        st.session_state.pop("mode", None)
    # Outside the form, so that the budget choices below follow the mode picked.
    mode = st.radio("Researcher mode", offer.modes, format_func=MODES.__getitem__, key="mode")

    gate, ctx = upload_gate(), get_script_run_ctx()
    offer_uploads = gate is not None and gate.installed and ctx is not None
    if gate is not None and ctx is not None and offer_uploads:
        gate.grant(ctx.session_id)  # this session entered the code: its uploads are let in
    with st.form("ask"):
        question = st.text_area("Question", max_chars=500, key="question",
                                placeholder="e.g. What does Qdrant Cloud pricing start at?")
        uploads = st.file_uploader(
            "Your documents (optional)", type=[e.lstrip(".") for e in ACCEPTED], accept_multiple_files=True,
            key="uploads", help=f"PDF, Word, Markdown, HTML or text: {cfg.upload_limits.describe()}. They are read "
                                "for this run only and removed when it ends; quotes from them cite the file and its "
                                "page or heading.") if offer_uploads else []
        preset = st.selectbox("Budget", list(PRESETS), index=0, key="preset",
                              format_func=lambda k: preset_label(k, mode),
                              help="Extractive runs cost nothing; the searches and fetches still count."
                              if mode == "extractive" else f"Each run is also capped at ${limits.max_run_usd:.2f} and "
                                                           "by what is left of today's limit.")
        start = st.form_submit_button("Start research", icon=":material/play_arrow:", type="primary")
    if start and reveals_code(question or "", state):
        st.error("Your question contains the access code. Remove it and ask again: questions are saved with their "
                 "report, which anyone with the link can read.", icon=":material/block:")
    elif start:
        docs = read_uploads(uploads or [])
        if uploads and docs is None:
            st.stop()
        outcome = jobs.start(question or "", mode, preset, docs=docs)
        if isinstance(outcome, Job):
            st.session_state.setdefault(UNUSED, {})[outcome.run_id] = st.session_state.pop(UNUSED_NOW, [])
            st.query_params[RUN] = outcome.run_id
            st.rerun()
        st.error(md_text(outcome.message), icon=":material/block:")


def read_uploads(files: list[UploadedFile]) -> Path | None:
    """The uploaded files staged and read (in the extraction workers), with progress; each file refused is named
    with its reason. The staged folder, or None (said why) when no file could be used."""
    if not files:
        return None
    bar = st.progress(0.0, text="Saving your files")

    def saved(done: int, total: int) -> None:
        bar.progress(done / total, text=f"Saved {done} of {total} files")

    def read(p: Progress) -> None:
        bar.progress(p.done / max(p.total, 1), text=f"Read {p.done} of {p.total} files ({p.failed} could not be read)")

    staged = stage([(f.name, f.getvalue()) for f in files], cfg.uploads_dir, cfg.upload_limits, progress=saved)
    refused = [(r.name, r.reason) for r in staged.refused]
    if staged.files:
        settings = jobs.settings().model_copy(update={"docs_dir": str(staged.folder)})
        try:
            index = DocsIndex.open(staged.folder, settings, progress=read)
        except ConfigError as e:
            discard(staged.folder, settings.cache_dir)
            st.error(md_text(f"Your files could not be read: {e}"), icon=":material/error:")
            return None
        refused += [(r.path, r.reason) for r in index.refused()]
        usable = index.stats.files
        index.close()
    else:
        usable = 0
    bar.empty()
    st.session_state[UNUSED_NOW] = refused  # shown beside the run once it starts (the page reruns to show it)
    for name, reason in refused:
        st.warning(md_text(f"{name} was not used: {reason}"), icon=":material/block:")
    if not usable:
        discard(staged.folder, jobs.settings().cache_dir)
        st.error("None of your files can be read, so the run was not started. Upload PDF, Word, Markdown, HTML or "
                 "text files within the limits above.", icon=":material/error:")
        return None
    return staged.folder


try:  # every read of the database below is a StoreError when it is down: one message, never a traceback
    jobs: JobRegistry = registry(cfg)
    limits = jobs.limits
    st.caption(f"Server limits: {jobs.running()} of {limits.max_concurrent} live runs in progress; "
               f"\\${jobs.ledger.today():.2f} of \\${limits.daily_usd:.2f} spent or reserved today (UTC), shared by "
               "all visitors.")
    live_page()
except StoreError as e:
    unavailable(e)
