"""Query-focused sentence selection: select_sentences(part, pages) -> the sentences that answer one question part,
best first, each an exact span of its page.

A sentence is eligible when it could answer the part at all: it offers a value of the part's answer type (a figure for
"how many", a name for "who"; answers.py), it says something about what is asked beyond the names (one of the part's
own words that is not a constraint, or the role of a person asked for: "which professor"), its page is about the part's
names, and the years, numbers and quoted titles the part gives are in the sentence or around it, with no other year
(not one it counts from: "since 2019") or numbered edition in their place ("iPhone 13" for "iPhone 14"; editions.py); a
"how many X" part's sentence says X; a "when did X <verb>" part's sentence says the verb, if at all, as having
happened; a "who won" part's sentence is about no earlier round ("beating Chile in the semifinal"). A part's verbs may
be said in a word of their family ("named" for "appointed", terms.FAMILIES), which counts as context in the score. A
page's site name counts as its title's words. Eligible sentences are ranked by BM25 (idf over the pages read, each term
present around the sentence counting at CONTEXT_WEIGHT), and a sentence is kept only within RELATIVE of the best one:
relevance is relative to the candidates. The score is a share of the part's idf-weighted terms, and context counts, so
a long question whose words no single sentence covers is still answered; only a best candidate below MIN_SCORE, a near
miss, leaves the part to a named gap. For a part that asks for a named kind ("which journal"), the kept sentences that
say the kind come first.
"""
from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import NamedTuple

from pydantic import BaseModel

from .analysis import (
    ANYONE,
    DATE_HEADS,
    NAME_KINDS,
    NAMED,
    TITLES,
    TYPED,
    Part,
    analyse_part,
    asked_office,
    did_verb,
)
from .answers import Value, answer_values, same_value
from .editions import Edition, editions_of, other_edition
from .sentences import Span, split_sentences
from .terms import IRREGULAR, YEAR, content_terms, kin, stem, terms_of, word_list

__all__ = ["PageText", "Pick", "Span", "SentenceIndex", "split_sentences", "select_sentences", "MIN_PICK_CHARS"]

MIN_PICK_CHARS = 15  # the quote matcher refuses shorter quotes (not tuned: its contract)
ROOT = 5  # two stems sharing this many first letters are of one root ("acquir", "acquisit"; not tuned)
K1, B = 1.2, 0.75  # BM25's usual values (not tuned)
# Chosen on dev only (docs/BENCHMARK.md). Each figure is a dev measure of `python -m pipeline bench` over every
# shipped suite's dev questions: the mean answer recall of the seven answerable suites (0.788 as shipped), and the
# rejection suite's pass rate.
CONTEXT_WEIGHT = 0.5  # a term of the part absent from the sentence but present around it; a term the part only
# inherits (from an earlier part or a statement) weighs this much too. 0: 0.757; 1: 0.709.
RELATIVE = 0.5  # a sentence is kept when it scores at least this share of the best eligible sentence. 0.3: 0.790 with
# more sentences quoted; 0.7: 0.788 (asked 0.655 against 0.686).
MIN_SCORE = 0.35  # no sentence is kept whose score (the share of the part's idf-weighted terms it says, near 1 for
# all of them) is below this: near misses become a gap. 0: 0.788, rejection 0.19; 0.25: 0.788, 0.31; 0.30: 0.783,
# 0.44; 0.35: 0.767, 0.69; 0.45: 0.730, 0.75. Again with the names, kinds and corroboration of this version
# (0.812 and 0.81 at 0.35): 0.30: 0.824, 0.56; 0.40: 0.794, 0.88.
FRAGMENT_FACTOR = 0.5  # a line with no closing punctuation and few words: a headline, caption or list item.
# 1: 0.759 (noise and failure-set fall, asked and pydocs rise).
RESTATES = 0.6  # a sentence that says this share of the part's topic (idf-weighted, two words at least) may tell
# its verb in other words ("Which executive blamed a glitch for the problems?": "X said a glitch led to problems").
# Dev, with the noise and rejection questions of version 2: 0.6: 0.800, rejection 0.875; 0.5: 0.800, 0.833; 0.8: 0.795,
# 0.875. Without the rule, first measured on the version-1 suites: 0.784 against 0.789, rejection 0.94 both.
NEAR_DUPLICATE = 0.6  # term-set Jaccard at or above which a sentence repeats a pick (unless its answer differs);
# no dev effect from 0.6 to 0.9: it keeps one wire story from being quoted twice.
CONTEXT_SENTENCES = 2  # the context of a sentence: this many either side, and its page's title and lede
LEDE_SENTENCES = 3
# A cost bound, not a tuned weight: up to this page length, a sentence said anywhere earlier on the page is found
# (a scan from the top for each sentence: quadratic); past it, only an identical earlier sentence, in linear time.
FULL_SCAN_CHARS = 100_000
SHORT_TERMS = 4  # a sentence of at most this many content words is a follow-up of the one before
_LEANING = frozenset(["it", "its", "they", "their", "this", "these", "he", "she", "his", "her", "that", "those"])

_PROMPTS = frozenset([">>>", "...", "$", "%"])  # "$ pip install x", "% make", ">>> f(1)", "... return x"
_OUTER = re.compile(r"^\W+|\W+$")


class PageText(BaseModel):
    """A fetched page as the selector sees it: its source id (S1...), title, extracted text, date and site (the host
    name it was fetched from, if any)."""

    source_id: str
    title: str | None = None
    text: str
    published: str | None = None
    site: str | None = None


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
    years: frozenset[str]
    fragment: bool
    question: bool


@dataclass
class SentenceIndex:
    """Sentences of a set of pages with their terms, built once and searched for each part."""

    pages: list[PageText]
    sentences: list[_Sentence] = field(default_factory=list)
    postings: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    page_terms: list[frozenset[str]] = field(default_factory=list)
    lede_terms: list[frozenset[str]] = field(default_factory=list)  # the title's and first sentences' terms
    page_years: list[frozenset[str]] = field(default_factory=list)  # years of the title, lede and date
    vocabulary: set[str] = field(default_factory=set)  # every term of every page, titles included
    first: list[int] = field(default_factory=list)  # index of each page's first sentence (pages are contiguous)
    avg_len: float = 1.0
    roots: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # the sentences' terms by ROOT letters

    @classmethod
    def build(cls, pages: Sequence[PageText]) -> SentenceIndex:
        """Split every page into sentences, keeping those at least MIN_PICK_CHARS long without their outer
        punctuation and not found (ignoring case) earlier on the page, so that the quote matcher, which takes
        the first occurrence, locates each pick where it was found."""
        index = cls(pages=list(pages))
        for p, page in enumerate(index.pages):
            text = page.text or ""
            lowered = text.lower()
            vocabulary: set[str] = set()
            index.first.append(len(index.sentences))
            said: set[str] = set()
            for span in split_sentences(text):
                if len(_OUTER.sub("", span.text)) < MIN_PICK_CHARS:
                    continue
                low = span.text.lower()
                earlier = (lowered.find(low, 0, span.end) < span.start if len(text) <= FULL_SCAN_CHARS
                           else low in said)
                said.add(low)
                if earlier:
                    continue  # already said earlier on the page: a quote of it would be located there
                terms = terms_of(span.text)
                if not terms:
                    continue
                s_id = len(index.sentences)
                index.sentences.append(_Sentence(
                    p, span, terms, Counter(terms), _years(span.text), _is_fragment(span.text),
                    span.text.rstrip(" \"'”’)»").endswith(("?", "？"))))
                for term in set(terms):
                    index.postings[term].append(s_id)
                    if len(term) >= ROOT:
                        index.roots[term[:ROOT]].add(term)
                vocabulary.update(terms)
            # The site's name counts as the title's words (on politifact.com every sentence is PolitiFact's), not as
            # its years.
            title = page.title or ""
            named = content_terms(f"{title} {_site_name(page.site)}", stemmed=True)
            lede = index.sentences[index.first[p]: index.first[p] + LEDE_SENTENCES]
            index.page_terms.append(frozenset(vocabulary | set(named)))
            index.vocabulary |= index.page_terms[-1]
            index.lede_terms.append(frozenset(named).union(*(x.tf for x in lede)))
            index.page_years.append(frozenset(YEAR.findall(f"{title} {page.published or ''}")).union(
                *(x.years for x in lede)))
        if index.sentences:
            index.avg_len = sum(len(s.terms) for s in index.sentences) / len(index.sentences)
        return index

    def around(self, s_id: int) -> tuple[set[str], set[str]]:
        """Terms and years around sentence `s_id`: its neighbours on its page, the page's title, lede and date."""
        page = self.sentences[s_id].page
        end = self.first[page + 1] if page + 1 < len(self.first) else len(self.sentences)
        near = self.sentences[max(self.first[page], s_id - CONTEXT_SENTENCES): min(end, s_id + CONTEXT_SENTENCES + 1)]
        return (set(self.lede_terms[page]).union(*(x.tf for x in near)),
                set(self.page_years[page]).union(*(x.years for x in near)))

    def idf(self, term: str) -> float:
        """BM25 idf over the sentences; a term found in no sentence gets the highest value."""
        n, df = len(self.sentences), len(self.postings.get(term, ()))
        return math.log(1 + (n - df + 0.5) / (df + 0.5))


def _site_name(host: str | None) -> str:
    """The words of a host name that name its site: "www.politifact.com" -> "politifact", "news.bbc.co.uk" ->
    "news bbc"; "" for an IP address or a one-label host."""
    labels = (host or "").lower().split(".")
    if len(labels) < 2 or ":" in (host or "") or all(label.isdigit() for label in labels):
        return ""  # a one-label host or an IPv4 or IPv6 address
    labels.pop()  # the top-level domain
    if len(labels) > 1 and labels[-1] in ("co", "com", "org", "net", "gov", "ac", "edu"):
        labels.pop()  # "bbc.co.uk"
    return " ".join(label for label in labels if label not in ("www", "m", "amp"))


def _is_fragment(text: str) -> bool:
    """A headline, caption or list item rather than a sentence: no closing punctuation and under 12 words; or a line
    of code after an interpreter's or a shell's prompt (">>> h = blake2b(digest_size=20)")."""
    return (text.rstrip()[-1:] not in ".!?\"'”’)»。！？" and len(text.split()) < 12
            or text.split(" ", 1)[0] in _PROMPTS)


def _says(topic: set[str], s: _Sentence) -> bool:
    """Whether sentence `s` says one of the `topic` words, or a word of the same root."""
    return bool(topic & s.tf.keys()) or any(_related(a, b) for a in topic for b in s.tf)


# Words before a verb's base form that make it unreal: to come, wished or supposed ("will sign", "could win",
# "would be signed"); "to" after a word of intent or expectation ("hoped to sign", "is expected to win"), not a
# purpose's "to" ("a function to replace the statement"); and a negation before any form ("was not signed").
_IRREALIS = frozenset(word_list("""
    will would could may might should shall can must cannot won't wouldn't couldn't won’t wouldn’t couldn’t"""))
_INTENT = frozenset(stem(w) for w in word_list("""
    hope plan expect want aim intend seek sought try tried wish promise agree prepare schedule set due going likely
    unlikely poised ready about able need"""))
_NEGATIONS = frozenset(word_list("not never"))
_WORD = re.compile(r"[\w'’-]+")
_CLAUSE_TOKEN = re.compile(r"[\w'’-]+|[,;:]")  # words (as _WORD) and the marks that end a clause
_CLAUSE_ENDS = frozenset(",;:")
_TOLD = frozenset(word_list("did was were had"))  # "did not sign it until March": a past that says when


def _happened(predicates: list[str], text: str) -> bool:
    """Whether `text` says one of `predicates` as having happened: once, not as an infinitive, after a modal or
    a negation ("according to reports" is no infinitive: "reports" is not a base form); a negation with "until"
    after it says when it did happen ("did not lift it until Dec. 3")."""
    tokens = [t.lower() for t in _CLAUSE_TOKEN.findall(text)]
    words = [t for t in tokens if t not in _CLAUSE_ENDS]
    told = _told_until(tokens)

    def denied(j: int) -> bool:
        return words[j] in _NEGATIONS and j not in told

    def unreal(j: int) -> bool:
        base = not words[j].endswith(("s", "ed", "ing")) and words[j] not in IRREGULAR
        return j > 0 and (denied(j - 1) or base and _modal(words, j - 1)) or (
            j > 1 and words[j - 1] in ("be", "have", "been") and (denied(j - 2) or _modal(words, j - 2)))

    return any(_related(p, stem(w)) and not unreal(j) for j, w in enumerate(words) for p in predicates)


def _told_until(tokens: list[str]) -> set[int]:
    """The word indexes of the negations among `tokens` (lower-cased words and clause ends) that say when a thing did
    happen ("did not sign it until May")."""
    # After "did", "was", "were" or "had", with "until" later in the same clause and no modal between: not "did not sign
    # it, saying it would wait until March".
    told: set[int] = set()
    negation: int | None = None
    n, previous = -1, ""
    for word in tokens:
        if word in _CLAUSE_ENDS or word in _IRREALIS:
            negation = None
            if word in _CLAUSE_ENDS:
                continue
        n += 1
        if word in _NEGATIONS and n > 0 and previous in _TOLD:
            negation = n
        elif word == "until" and negation is not None:
            told.add(negation)
            negation = None
        previous = word
    return told


def _modal(words: list[str], j: int) -> bool:
    """Whether words[j] makes the verb after it unreal: a modal, or "to" after a word of intent."""
    return words[j] in _IRREALIS or words[j] == "to" and j > 0 and stem(words[j - 1]) in _INTENT


def _hedged(text: str) -> bool:
    """Whether `text` says anything as only wished, expected, possible or denied: a modal, "to" after a word of
    intent, or a negation."""
    words = [w.lower() for w in _WORD.findall(text)]
    return any(w in _NEGATIONS or _modal(words, j) for j, w in enumerate(words))


def _dependent(s: _Sentence) -> bool:
    """A sentence that leans on the one before: short ("New in version 3.11."), or opening with a pronoun or a
    parenthesis ("(Contributed by ...)", "It was founded in 1998.")."""
    return len(s.terms) <= SHORT_TERMS or s.span.text[:1] == "(" or s.span.text.split(" ", 1)[0].lower() in _LEANING


# A round before a final: a win in it wins no title ("reached the final, beating Chile in the semifinal").
_EARLIER_ROUND = re.compile(r"\b(?:semi|quarter)[- ]?finals?(?:ists?)?\b|\bround[- ]of[- ](?:\d+|sixteen)\b|"
                            r"\blast[- ](?:16|sixteen|eight|four)\b|\bgroup[- ]stage\b", re.I)
_WINS = kin(stem("win"))


@dataclass
class _Asked:
    """A part as the scorer uses it: term weights, what is asked about, and the constraints a sentence must meet."""

    part: Part
    weights: dict[str, float]
    topic: set[str]  # the core's words that are not names, years, numbers or the answer's description
    names: list[set[str]]  # the terms of each name the core gives (descriptions' names are only weights)
    given: list[str | None]  # of each name shaped like a person's ("Kurt Volker"), its first word ("kurt")
    years: set[str]
    fixed: list[set[str]]  # numbers and quoted titles of the core: each must be in the sentence or around it
    predicates: list[str]  # the core's verbs: a sentence must say one of them (or a word of the same root)
    office: set[str]  # of "Who is/was the <office> ...?", the office's words: a sentence must say one of them
    editions: list[Edition]  # numbers beside a word ("iPhone 14"): a sentence must not name another in their place
    done: str | None  # the verb of "... did X <verb>?": a sentence that says it must say it as having happened
    role: set[str]  # the role of a person asked for ("which professor"), stemmed: a sentence may say it for the topic
    wins: set[str]  # the part's verbs of winning, unless it names an earlier round: a sentence must not tell that round

    @classmethod
    def of(cls, part: Part) -> _Asked:
        slot = set(part.focus.slot)
        weights = {t: CONTEXT_WEIGHT if t in slot else 1.0 for t in part.terms}
        for t in [*part.described, *part.context_terms]:
            weights.setdefault(t, CONTEXT_WEIGHT)
        hard = [c for c in part.constraints if not c.soft]
        constraint_terms = {t for c in part.constraints for t in c.terms}
        return cls(part=part, weights=weights, topic=set(part.terms) - constraint_terms - slot,
                   names=[set(c.terms) for c in hard if c.kind == "name"],
                   given=[_given(c.text) for c in hard if c.kind == "name"],
                   years={c.text for c in hard if c.kind == "year"},
                   fixed=[set(c.terms) for c in hard if c.kind in ("number", "quoted")],
                   predicates=part.predicates,
                   office=set(asked_office(part.text)), editions=editions_of(part.text),
                   done=did_verb(part.text) if part.past else None,
                   role={stem(part.focus.head)} if part.focus.head and part.focus.answer_type == "person" and (
                       part.focus.head not in _NO_ROLE) else set(),
                   wins=set() if _EARLIER_ROUND.search(part.text) else set(_WINS.intersection(part.predicates)))


# A sentence that says "people" or "man" says nothing of what is asked; nor does one that says "head" or "chair".
_NO_ROLE = ANYONE | frozenset(word_list("head chair"))


def _related(a: str, b: str) -> bool:
    """Two stems of one root (_same_root), or words of one family (terms.FAMILIES: "win", "victori")."""
    return _same_root(a, b) or b in kin(a)


def _years(text: str) -> frozenset[str]:
    """The years `text` is about: not one it counts from ("its chief operating officer since 2019" is about now)."""
    return frozenset(m.group() for m in YEAR.finditer(text) if not text[max(0, m.start() - 6):m.start()].lower()
                     .endswith("since "))


def _kindred(term: str, index: SentenceIndex) -> AbstractSet[str]:
    """The other terms of `index`'s sentences that are of `term`'s family or share its first ROOT letters ("supplier"
    for "suppli"; not "winter" for "win", as _same_root's shorter prefixes would)."""
    same = index.roots.get(term[:ROOT], set()) if len(term) >= ROOT else set()
    return ((kin(term) & index.postings.keys()) | same) - {term}


def _same_root(a: str, b: str) -> bool:
    """Two stems of one root: equal, one the other's start ("win" and "winner", "found" and "founder"), or sharing
    their first five letters ("acquir" and "acquisit")."""
    if a == b:
        return True
    short = min(len(a), len(b))
    return short >= 3 and (a.startswith(b) or b.startswith(a)) or short >= ROOT and a[:ROOT] == b[:ROOT]


class _Name(NamedTuple):
    """A name the part gives: its terms, and the one word that identifies it on these pages."""

    terms: set[str]
    mark: str


# Two or three capitalised words, initials between them: a person's name as a question writes it ("Kurt Volker",
# "Patrick W. Carlineo Jr.", "Lucas Paganini's"), whose first word a page may never repeat.
_PERSON_SHAPED = re.compile(r"[A-Z][a-z]++(?:\s++[A-Z]\.)*+(?:\s++[A-Z][a-z]++){1,2}+\.?(?:['’]s)?")


def _given(name: str) -> str | None:
    """The stemmed first word of a name shaped like a person's, else None ("The Doobie Brothers" has none)."""
    if not _PERSON_SHAPED.fullmatch(name):
        return None
    first = content_terms(name.split()[0], stemmed=True)
    return first[0] if first else None


def _names(asked: _Asked, idf: dict[str, float], vocabulary: AbstractSet[str]) -> list[_Name]:
    """Each of the part's names with its mark: its rarest word that the pages use ("Carlineo" for "Patrick W. Carlineo
    Jr.", "Noel" for "Tova Noel" when no page says "Tova"), a title aside ("Trump" for "President Trump") and, for a
    person's name, the given name too: "Volker" marks "Kurt Volker", since a page that says "Kurt" says "Volker"."""
    out = []
    for name, given in zip(asked.names, asked.given, strict=True):
        core = name - TITLES or name
        # The given name only when the pages use no other word of the name ("the Corrigans" of "Corrigan Brothers").
        core = {t for t in core - {given} if t in vocabulary} or {t for t in core if t in vocabulary} or core
        out.append(_Name(name, max(core, key=lambda t: (idf.get(t, 0.0), t))))
    return out


def _named(name: _Name, terms: AbstractSet[str]) -> bool:
    """Whether `terms` name `name`: by its mark, or by two thirds of its words."""
    return name.mark in terms or 3 * len(name.terms & terms) >= 2 * len(name.terms)


def _about(names: list[_Name], terms: AbstractSet[str]) -> bool:
    """Whether a page with `terms` is about the part: it names at least half of the part's names."""
    return 2 * sum(1 for name in names if _named(name, terms)) >= len(names)


# What a count may be told without: "how many people" ("12 were hurt"), "how many times", "how many years".
_UNCOUNTED = frozenset(stem(w) for w in [*word_list("people persons times"), *DATE_HEADS])


def _eligible(asked: _Asked, index: SentenceIndex, s_id: int, values: list[Value], names: list[_Name],
              restates: bool) -> bool:
    s = index.sentences[s_id]
    if s.question:
        return False  # a question is no answer
    said = asked.topic | asked.role
    if asked.topic and not _says(said, s) and not (
            _dependent(s) and s_id > index.first[s.page] and _says(said, index.sentences[s_id - 1])):
        return False  # it says nothing of what is asked (a short follow-up may say it through the sentence before)
    if asked.part.focus.answer_type in TYPED and not values:
        return False
    tells = any(_related(p, t) for p in asked.predicates for t in s.tf)
    if asked.predicates and not restates and not tells:
        return False  # "Which firm won ...?" is not answered by a sentence about the competition that says no winner
    if asked.predicates and asked.part.past and not _happened(asked.predicates, s.span.text) and not (
            restates and not tells and not _hedged(s.span.text)):
        return False  # "Where was the deal signed?" is not answered by "he hoped to sign it in Chile"
    if asked.wins and not any(_same_root(w, t) for w in asked.wins for t in s.tf) and _EARLIER_ROUND.search(
            s.span.text):
        return False  # "Who won the cup?" is not answered by "beating Chile in the semifinal" ("won it after a
        # semifinal win" says the verb asked, and answers)
    if asked.done and any(_same_root(asked.done, t) for t in s.tf) and not _happened([asked.done], s.span.text):
        return False  # "When did Coty close the deal?" is not answered by "The deal is expected to close in March"
    if asked.office and not _says(asked.office, s):
        return False  # "Who was Bolivia's interim president?" is not answered by a sentence naming an ombudsman
    head = stem(asked.part.focus.head or "")
    if asked.part.focus.wh == "how many" and head and head not in _UNCOUNTED and not _says({head}, s):
        return False  # "How many subscribers ...?" is not answered by a count of games
    around, years = index.around(s_id)
    if head in NAME_KINDS and not (_says({head}, s) or head in around):
        return False  # "Which stadium ...?" is not answered by a sentence that names a city (analysis.NAME_KINDS)
    if asked.years and (s.years or years) and not (s.years or years) & asked.years:
        return False  # the sentence, or else what is around it, is about other years than the part's
    if any(not fixed <= around for fixed in asked.fixed):
        return False
    if other_edition(asked.editions, s.span.text):
        return False  # "What does the iPhone 14 cost?" is not answered by "The iPhone 13 starts at $699"
    near = around | s.tf.keys()
    return not names or any(_named(name, near) for name in names)


def select_sentences(part: Part | str, pages: Sequence[PageText] | SentenceIndex, k: int = 3, *,
                     per_page: int = 2, extra_terms: Sequence[str] = ()) -> list[Pick]:
    """Up to `k` sentences of `pages` that answer `part`, best first, at most `per_page` from one page.

    `part` is an analysed part (analysis.py) or a sub-question's text; `extra_terms` (words of the topic it leans on)
    count as its context. Only eligible sentences (see the module's docstring) within RELATIVE of the best are
    picked, so a part no page answers gives []. A near-duplicate of a pick is skipped unless it offers another
    answer value (two sources that disagree are both kept). Pass a SentenceIndex to reuse one split of the pages.
    """
    if isinstance(part, str):
        part = analyse_part(part, content_terms(" ".join(extra_terms), stemmed=True))
    elif extra_terms:
        part = part.model_copy(update={"context_terms": [*part.context_terms, *content_terms(
            " ".join(extra_terms), stemmed=True)]})
    index = pages if isinstance(pages, SentenceIndex) else SentenceIndex.build(pages)
    if part.answer_of is not None and not select_sentences(part.answer_of, index, k=1):
        return []  # "whom did it beat": "it" is the answer of a part no sentence answers
    asked = _Asked.of(part)
    if not asked.weights or not index.sentences or k <= 0:
        return []
    if not asked.topic and not (asked.part.focus.answer_type in TYPED and (asked.names or asked.fixed)):
        return []  # nothing asked about but names: only a typed part about them ("How old is X?") is answerable
    idf = {t: index.idf(t) for t in {*asked.weights, *asked.topic, *(t for name in asked.names for t in name)}}
    # A name's words that no page uses, when the pages use its others ("Tova" of "Tova Noel"), are how the question
    # writes the name, not what a sentence must say.
    unused = {t for name in asked.names if name & index.vocabulary for t in name - index.vocabulary}
    total = sum(w * idf[t] for t, w in asked.weights.items() if t not in unused)
    keys = asked.topic | asked.role if asked.topic else set(asked.weights)
    # A sentence may say a key in other words of its family ("named" for "appointed"): those words' sentences count.
    family_of = {t: _kindred(t, index) if t in asked.predicates else frozenset() for t in asked.weights}
    candidates = {s_id for t in keys for v in {t, *family_of[t]} for s_id in index.postings.get(v, ())}
    names = _names(asked, idf, index.vocabulary)
    topic_weight = sum(idf[t] for t in asked.topic)
    about = [_about(names, terms) for terms in index.page_terms]
    scored: list[tuple[float, int, list[Value]]] = []
    for s_id in sorted(candidates):
        s = index.sentences[s_id]
        if not about[s.page]:
            continue  # a page that never names what the part is about cannot answer it
        values = answer_values(s.span.text, part)
        said = sum(idf[t] for t in asked.topic if t in s.tf)
        restates = len(asked.topic & s.tf.keys()) >= 2 and said >= RESTATES * topic_weight
        if not _eligible(asked, index, s_id, values, names, restates):
            continue
        around, _years = index.around(s_id)
        norm = K1 * (1 - B + B * len(s.terms) / index.avg_len)
        score = 0.0
        for t, w in asked.weights.items():
            if t in s.tf:
                score += w * idf[t] * s.tf[t] * (K1 + 1) / (s.tf[t] + norm)
            elif t in around or family_of[t] & s.tf.keys():
                score += CONTEXT_WEIGHT * w * idf[t]
        score /= total
        score *= FRAGMENT_FACTOR if s.fragment else 1.0
        scored.append((score, s_id, values))
    if not scored:
        return []
    scored.sort(key=lambda x: (-x[0], x[1]))
    best = scored[0][0]
    if best < MIN_SCORE:
        return []  # the best candidate says too little of what is asked: a near miss, named as a gap
    kept = [x for x in scored if x[0] >= RELATIVE * best]
    head = stem(part.focus.head or "")
    if part.focus.answer_type in NAMED and head in part.focus.slot:
        # "In which journal ...?": a sentence that names the answer's kind ("the journal JAMA Psychiatry") comes first.
        kept.sort(key=lambda x: head not in index.sentences[x[1]].tf)
    return _diverse(index, kept, k, per_page)


def _diverse(index: SentenceIndex, ranked: list[tuple[float, int, list[Value]]], k: int,
             per_page: int) -> list[Pick]:
    """The best-ranked sentences, at most `per_page` a page, skipping one that repeats a pick's words and answer."""
    chosen: list[tuple[float, int, list[Value]]] = []
    per: Counter[int] = Counter()
    for item in ranked:
        if len(chosen) == k:
            break
        score, s_id, values = item
        s = index.sentences[s_id]
        if per[s.page] >= per_page or any(_repeats(index, s_id, values, c) for c in chosen):
            continue
        chosen.append(item)
        per[s.page] += 1
    picks = []
    for score, s_id, _values in chosen:
        s = index.sentences[s_id]
        picks.append(Pick(source_id=index.pages[s.page].source_id, start=s.span.start, end=s.span.end,
                          text=s.span.text, score=round(score, 4)))
    return picks


def _repeats(index: SentenceIndex, s_id: int, values: list[Value], chosen: tuple[float, int, list[Value]]) -> bool:
    a, b = frozenset(index.sentences[s_id].terms), frozenset(index.sentences[chosen[1]].terms)
    if len(a & b) < NEAR_DUPLICATE * len(a | b):
        return False
    other = chosen[2]
    return not values or not other or all(any(same_value(v, o) for o in other) for v in values)
