"""Live research (gated): unlock with the access code, ask a question, watch the run, read the report; resume a
run whose server instance stopped.

The run itself happens in a background thread of the job registry (ui/jobs.py), which never calls st.*; this page
only reads its progress from the database, polled by a fragment, so any instance can show it. The unlocked state
lives in this session only, never the URL; the run's id is in the URL (`?run=`), so a reload finds it again. Without
a model key only the extractive mode (no model) is offered.
"""
from __future__ import annotations

import streamlit as st

from pipeline.store.base import StoreError
from pipeline.store.timeline import load_timeline
from ui.access import code_matches, reveals_code, visitor_id
from ui.components import md_text, show_report
from ui.jobs import MODES, PRESETS, Job, JobRegistry, preset_label
from ui.library import mode_label
from ui.progress import LiveProgress
from ui.state import access, config, limiter, registry, store
from ui.views import report_view

UNLOCKED, RUN = "live_unlocked", "run"

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

    with st.form("ask"):
        question = st.text_area("Question", max_chars=500, key="question",
                                placeholder="e.g. What does Qdrant Cloud pricing start at?")
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
        outcome = jobs.start(question or "", mode, preset)
        if isinstance(outcome, Job):
            st.query_params[RUN] = outcome.run_id
            st.rerun()
        st.error(md_text(outcome.message), icon=":material/block:")


try:  # every read of the database below is a StoreError when it is down: one message, never a traceback
    jobs: JobRegistry = registry(cfg)
    limits = jobs.limits
    st.caption(f"Server limits: {jobs.running()} of {limits.max_concurrent} live runs in progress; "
               f"\\${jobs.ledger.today():.2f} of \\${limits.daily_usd:.2f} spent or reserved today (UTC), shared by "
               "all visitors.")
    live_page()
except StoreError as e:
    unavailable(e)
