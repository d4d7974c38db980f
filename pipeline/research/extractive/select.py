"""Query-focused sentence selection: select_sentences(sub_question, pages) -> relevant, diverse, exact Picks."""
from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from .sentences import Span, split_sentences
from .terms import content_terms, stem, strip_request, terms_of, word_list

__all__ = ["PageText", "Pick", "Span", "SentenceIndex", "split_sentences", "select_sentences", "answer_kinds",
           "MIN_COVERAGE", "MIN_PICK_CHARS"]

MIN_PICK_CHARS = 15  # the quote matcher refuses shorter quotes
K1, B = 1.2, 0.75  # BM25
MIN_COVERAGE = 0.5  # relevance threshold: idf-weighted share of the question's terms in the sentence (see _eligible)
CONTEXT_MIN_COVERAGE = 0.75  # ... or this share in its context, with at least MIN_SENTENCE_SHARE in the sentence itself
CONTEXT_SENTENCES = 2  # the context: this many sentences either side, the page's first LEDE_SENTENCES, its title
LEDE_SENTENCES = 3
MIN_SENTENCE_SHARE = 0.34
KIND_SENTENCE_SHARE = 0.2  # ... or this, when the sentence carries the number or date the question asks for
FRAGMENT_PENALTY = 0.25  # a line with no closing punctuation and few words: a headline, caption or list item
CODE_PENALTY = 0.4  # a line of code or a shell session rather than prose (documentation pages)
PROXIMITY_WEIGHT = 0.15  # query terms close together
ANSWER_WEIGHT = 0.4  # the sentence carries the kind of thing asked for (a number, a date, a name)
MISSING_KIND_FACTOR = 0.6  # score multiplier when a number or date is asked for and the sentence has none
TITLE_WEIGHT = 0.1  # the page title matches the question
PAGE_WEIGHT = 0.2  # the page as a whole covers the question
ANSWER_TERM_WEIGHT = 0.5  # question words that name the kind of answer ("cost", "year") rather than its topic
EXTRA_WEIGHT = 0.5  # weight of `extra_terms` (a topic carried from an earlier part) relative to the question's
MMR_LAMBDA = 0.7
NEAR_DUPLICATE = 0.6  # term-set Jaccard at or above which a candidate repeats a pick and is skipped
POOL = 60  # candidates considered by MMR

# Compared with stemmed terms, so stemmed alike.
_NUMBER_WORDS = frozenset(stem(w) for w in word_list("""
    two three four five six seven eight nine ten eleven twelve thirteen fifteen twenty thirty forty
    fifty hundred hundreds thousand thousands million millions billion billions trillion dozen dozens
    half percent
"""))
_MONTHS = frozenset(stem(w) for w in word_list("""
    january february march april may june july august september october november december jan feb mar
    apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday
    yesterday today tomorrow tonight week month year decade century spring summer autumn fall winter
"""))
_KINDS = (
    ("age", re.compile(r"\bhow old\b|\b(?:what|which) age\b|\bage of\b|\b(?:his|her|their|its) age\b", re.I)),
    ("number", re.compile(r"\bhow (?:many|much|long|far|big|large|tall|high|often|fast|heavy)\b|\bpercent|"
                          r"\bper ?cent\b|\bnumber of\b|\bwhat (?:share|proportion|fraction|amount|price|rate|"
                          r"percentage|age|score)\b|\bcost\b|\bprice\b|\bwhat (?:was|is|were|are) (?:the|its|their) "
                          r"(?:\w+ )?(?:cost|price|total|amount|figure|value|rate|score|population|budget|speed|range|"
                          r"size|weight|height|length|capacity|age|revenue|profit|salary|distance|share|valuation)\b",
                          re.I)),
    ("date", re.compile(r"\bwhen\b|\bwhat (?:year|date|day|month|time)\b|\bwhich (?:year|date|day|month)\b|"
                        r"\bsince when\b|\bhow long ago\b|\bin what year\b|\bdate\b", re.I)),
    ("name", re.compile(r"\bwho(?:m|se)?\b|\bwhich (?:company|companies|person|people|team|country|firm|city|state|"
                        r"player|brand|group|organi[sz]ation|agency|version|model|product)\b|\bwhere\b|\bwhat "
                        r"(?:company|country|city|team|brand|name|firm|version)\b|\bnamed?\b", re.I)),
)
# Words that describe the answer rather than the topic: the answer sentence often says "$129", not "cost".
_ANSWER_TERMS = frozenset(content_terms("cost costs price prices amount number total figure year date day time percent "
                                        "percentage rate name people long large big old high tall far size age",
                                        stemmed=True))
# "48-year-old", "aged 55", "Patrick W. Carlineo Jr., 55," (an age after a name)
AGE = re.compile(r"\b\d{1,3}[- ]years?[- ]old\b|\baged? \d{1,3}\b|[A-Z][\w.'’-]+, \d{1,3},")
_CODE_START = re.compile(r"(?:>>>|\.\.\.\s|\$ |#|[A-Za-z_][\w.]*\s*(?:=|\())")
_OUTER = re.compile(r"^\W+|\W+$")
_YEAR = re.compile(r"^(?:1[89]|20)\d\d$")
_CAPITAL_WORD = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][\w'’-]+")


class PageText(BaseModel):
    """A fetched page as the selector sees it: its source id (S1...), title and extracted text."""

    source_id: str
    title: str | None = None
    text: str


class Pick(BaseModel):
    """A selected sentence: text == the page's text[start:end]; score is its relevance (higher is better)."""

    source_id: str
    start: int
    end: int
    text: str
    score: float


@dataclass
class _Sentence:
    page: int
    span: Span
    terms: list[str]  # content terms (stemmed), in order
    tf: Counter[str]
    numbers: frozenset[str]
    dates: frozenset[str]
    names: frozenset[str]
    fragment: bool
    age: bool
    code: bool


@dataclass
class SentenceIndex:
    """Sentences of a set of pages with their terms, built once and searched for each sub-question."""

    pages: list[PageText]
    sentences: list[_Sentence] = field(default_factory=list)
    postings: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    page_terms: list[frozenset[str]] = field(default_factory=list)
    title_terms: list[frozenset[str]] = field(default_factory=list)
    lede_terms: list[frozenset[str]] = field(default_factory=list)  # the title's and first sentences' terms
    first: list[int] = field(default_factory=list)  # index of each page's first sentence (pages are contiguous)
    avg_len: float = 1.0

    @classmethod
    def build(cls, pages: Sequence[PageText]) -> SentenceIndex:
        """Split every page into sentences, keeping those at least MIN_PICK_CHARS long without their outer
        punctuation and not found (ignoring case) earlier on the page, so that the quote matcher, which takes
        the first occurrence, locates each pick where it was found."""
        index = cls(pages=list(pages))
        for p, page in enumerate(index.pages):
            lowered = (page.text or "").lower()
            vocabulary: set[str] = set()
            index.first.append(len(index.sentences))
            for span in split_sentences(page.text or ""):
                if len(_OUTER.sub("", span.text)) < MIN_PICK_CHARS:
                    continue  # the quote matcher strips outer quotes, dashes and ellipses, then wants 15 characters
                if lowered.find(span.text.lower(), 0, span.end) < span.start:
                    continue  # already said earlier on the page: a quote of it would be located there
                terms = terms_of(span.text)
                if not terms:
                    continue
                numbers = frozenset(t for t in terms if t[0].isdigit() and not _YEAR.match(t) or t in _NUMBER_WORDS)
                dates = frozenset(t for t in terms if _YEAR.match(t) or t in _MONTHS)
                names = frozenset(m.group().lower() for m in _CAPITAL_WORD.finditer(span.text))
                s_id = len(index.sentences)
                index.sentences.append(_Sentence(p, span, terms, Counter(terms), numbers, dates, names,
                                                  _is_fragment(span.text), bool(AGE.search(span.text)),
                                                  _is_code(span.text)))
                for term in set(terms):
                    index.postings[term].append(s_id)
                vocabulary.update(terms)
            index.page_terms.append(frozenset(vocabulary))
            index.title_terms.append(frozenset(content_terms(page.title or "", stemmed=True)))
            lede = index.sentences[index.first[p]: index.first[p] + LEDE_SENTENCES]
            index.lede_terms.append(index.title_terms[p].union(*(x.tf.keys() for x in lede)))
        if index.sentences:
            index.avg_len = sum(len(s.terms) for s in index.sentences) / len(index.sentences)
        return index

    def context(self, s_id: int) -> set[str]:
        """Terms around sentence `s_id`: its neighbours on the same page, the page's title and first sentences."""
        page = self.sentences[s_id].page
        end = self.first[page + 1] if page + 1 < len(self.first) else len(self.sentences)
        near = self.sentences[max(self.first[page], s_id - CONTEXT_SENTENCES): min(end, s_id + CONTEXT_SENTENCES + 1)]
        return set(self.lede_terms[page]).union(*(x.tf.keys() for x in near))

    def idf(self, term: str) -> float:
        """BM25 idf over the sentences; a term found in no sentence gets the highest value."""
        n, df = len(self.sentences), len(self.postings.get(term, ()))
        return math.log(1 + (n - df + 0.5) / (df + 0.5))


def _is_fragment(text: str) -> bool:
    """A headline, caption or list item rather than a sentence: no closing punctuation and under 12 words."""
    return text.rstrip()[-1:] not in ".!?\"'”’)»。！？" and len(text.split()) < 12


def _is_code(text: str) -> bool:
    """Code or a shell session rather than prose: a prompt, a comment line, an indented line, an assignment
    or call at the start, or many symbols."""
    if _CODE_START.match(text) or "\n " in text or "\n\t" in text:
        return True
    return sum(text.count(c) for c in "=(){}[]<>#$_\\;|") > 0.06 * len(text)


def answer_kinds(question: str) -> set[str]:
    """What the question asks for: "number" (how many, how much, percent...), "date" (when, what year...),
    "age" (how old), "name" (who, which company, where...); empty when none of these."""
    return {kind for kind, pattern in _KINDS if pattern.search(question)}


def _proximity(terms: list[str], wanted: set[str]) -> float:
    """(m - 1) / (w - 1) for the smallest window of w terms holding all m distinct wanted terms present."""
    hits = [(i, t) for i, t in enumerate(terms) if t in wanted]
    distinct = len({t for _, t in hits})
    if distinct < 2:
        return 0.0
    best, count, left = len(terms), Counter[str](), 0
    for pos, term in hits:
        count[term] += 1
        while len(count) == distinct:
            best = min(best, pos - hits[left][0] + 1)
            count[hits[left][1]] -= 1
            if not count[hits[left][1]]:
                del count[hits[left][1]]
            left += 1
    return (distinct - 1) / max(1, best - 1)


def _answer_bonus(s: _Sentence, kinds: set[str], question_terms: set[str], question_names: set[str]) -> float:
    got = 0.0
    if "number" in kinds and s.numbers - question_terms:
        got = 1.0
    if "date" in kinds and s.dates - question_terms:
        got = 1.0
    if "age" in kinds and s.age:
        got = 1.0
    if "name" in kinds and s.names - question_names:
        got = max(got, 0.7)
    return got


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _named(question: str) -> frozenset[str]:
    """Terms of the names the question is about: capitalised words past its first word ("Tesla", "Assange")."""
    words = re.findall(r"[\w'’-]+", question)[1:]
    capitalised = " ".join(w for w in words if w[:1].isupper() and not w.isupper() or len(w) > 1 and w.isupper())
    return frozenset(content_terms(capitalised, stemmed=True))


def _eligible(coverage: float, context_coverage: float, matched: int, wanted: int, typed: bool) -> bool:
    """The relevance threshold. A sentence is kept when it holds at least MIN_COVERAGE of the question's
    idf-weighted terms and (for questions of two or more terms) matches two of them; or when its context
    (neighbouring sentences, the page's title and first sentences) holds CONTEXT_MIN_COVERAGE of them and
    the sentence itself at least MIN_SENTENCE_SHARE, or KIND_SENTENCE_SHARE when it carries the number or
    date the question asks for (`typed`): the answer sentence often leaves out words its context supplies
    ("Top speed is ... 124 mph." under a title naming the car). Terms found on no page weigh the most, so a
    question about something the pages never mention gets nothing; a sentence matching only `extra_terms`
    (none of the sub-question's own words) neither."""
    if matched == 0:
        return False
    if coverage >= MIN_COVERAGE and matched >= min(2, wanted):
        return True
    if context_coverage < CONTEXT_MIN_COVERAGE:
        return False
    return coverage >= (KIND_SENTENCE_SHARE if typed else MIN_SENTENCE_SHARE)


def select_sentences(sub_question: str, pages: Sequence[PageText] | SentenceIndex, k: int = 3, *,
                     per_page: int = 2, extra_terms: Sequence[str] = (), mmr_lambda: float = MMR_LAMBDA) -> list[Pick]:
    """Up to `k` sentences of `pages` that answer `sub_question`, in MMR order (best first), at most `per_page`
    from one page.

    Relevance = BM25 (idf over all the pages' sentences, normalised by the question's total idf) + a
    proximity bonus + a bonus when the sentence carries what the question asks for (numbers for "how many",
    dates for "when", names for "who") + small bonuses when the page's title and text cover the question.
    Sentences under the threshold (_eligible) are never picked: an unanswerable question gives []. The rest
    are picked by MMR (similarity: Jaccard of term sets; near-duplicates skipped). `extra_terms` (e.g. the
    topic words of an earlier part, for "when did it ...") count at EXTRA_WEIGHT. Pass a SentenceIndex to
    reuse one split of the pages across sub-questions."""
    index = pages if isinstance(pages, SentenceIndex) else SentenceIndex.build(pages)
    asked = strip_request(sub_question)
    weights = {t: ANSWER_TERM_WEIGHT if t in _ANSWER_TERMS else 1.0 for t in content_terms(asked, stemmed=True)}
    for term in content_terms(" ".join(extra_terms), stemmed=True):
        weights.setdefault(term, EXTRA_WEIGHT)
    if not weights or not index.sentences or k <= 0:
        return []
    idf = {t: index.idf(t) for t in weights}
    topic = [idf[t] for t in weights if t not in _ANSWER_TERMS]
    for t in weights:
        if t in _ANSWER_TERMS and topic:  # "how big": the answer says "15,000", so an absent "big" must not
            idf[t] = min(idf[t], max(topic))  # outweigh the topic as a word found nowhere would
    total = sum(w * idf[t] for t, w in weights.items())
    main = set(content_terms(asked, stemmed=True))
    kinds = answer_kinds(sub_question)
    question_names = {w.lower() for w in re.findall(r"[\w'’-]+", sub_question)}
    page_cov = [sum(w * idf[t] for t, w in weights.items() if t in vocab) / total for vocab in index.page_terms]
    title_cov = [sum(w * idf[t] for t, w in weights.items() if t in tt) / total for tt in index.title_terms]

    names = _named(asked)
    candidates: set[int] = set()
    for term in weights:
        candidates.update(index.postings.get(term, ()))
    scored: list[tuple[float, int]] = []
    for s_id in candidates:
        s = index.sentences[s_id]
        if names and names.isdisjoint(index.page_terms[s.page]):
            continue  # a page that never names what the question is about cannot answer it
        present = [t for t in weights if t in s.tf]
        coverage = sum(weights[t] * idf[t] for t in present) / total
        answer = _answer_bonus(s, kinds, main, question_names)
        typed = answer >= 1.0  # a number or date asked for (a capitalised word is too common to count)
        matched = sum(1 for t in present if t in main)
        if not (coverage >= MIN_COVERAGE and matched >= max(1, min(2, len(main)))):  # else the context decides
            around = index.context(s_id)
            context_cov = sum(w * idf[t] for t, w in weights.items() if t in around) / total
            if not _eligible(coverage, context_cov, matched, len(main), typed):
                continue
        norm = K1 * (1 - B + B * len(s.terms) / index.avg_len)
        bm25 = sum(weights[t] * idf[t] * s.tf[t] * (K1 + 1) / (s.tf[t] + norm) for t in present) / total
        score = (bm25 + PROXIMITY_WEIGHT * _proximity(s.terms, set(present)) + ANSWER_WEIGHT * answer
                 + TITLE_WEIGHT * title_cov[s.page] + PAGE_WEIGHT * page_cov[s.page]
                 - FRAGMENT_PENALTY * s.fragment - CODE_PENALTY * s.code)
        if kinds & {"number", "date", "age"} and not typed:
            score *= MISSING_KIND_FACTOR
        if score > 0:  # penalties can outweigh a weak match: such a line is not worth quoting
            scored.append((score, s_id))
    scored.sort(key=lambda x: (-x[0], x[1]))
    return _mmr(index, scored[:POOL], k, per_page, mmr_lambda)


def _mmr(index: SentenceIndex, pool: list[tuple[float, int]], k: int, per_page: int, lam: float) -> list[Pick]:
    """Maximal marginal relevance over `pool`: relevance (scaled to the best) against similarity to picks."""
    if not pool:
        return []
    top = pool[0][0]  # > 0
    sets = {s_id: frozenset(index.sentences[s_id].terms) for _, s_id in pool}
    chosen: list[tuple[float, int]] = []
    per: Counter[int] = Counter()
    remaining = list(pool)
    while remaining and len(chosen) < k:
        best, best_value = None, -math.inf
        for item in remaining:
            score, s_id = item
            if per[index.sentences[s_id].page] >= per_page:
                continue
            similarity = max((_jaccard(sets[s_id], sets[c]) for _, c in chosen), default=0.0)
            if similarity >= NEAR_DUPLICATE:
                continue
            value = lam * score / top - (1 - lam) * similarity
            if value > best_value:
                best, best_value = item, value
        if best is None:
            break
        chosen.append(best)
        per[index.sentences[best[1]].page] += 1
        remaining.remove(best)
    picks = []
    for score, s_id in chosen:
        s = index.sentences[s_id]
        page = index.pages[s.page]
        picks.append(Pick(source_id=page.source_id, start=s.span.start, end=s.span.end, text=s.span.text,
                          score=round(score, 4)))
    return picks
