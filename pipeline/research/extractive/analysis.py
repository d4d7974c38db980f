"""What one part of a question asks: analyse_part(text) -> Focus (wh-word, head noun, answer type) and Constraints
(names, years, dates, numbers, quoted titles), in code (no model).

The answer type says what a sentence must carry to answer the part (a person's name for "who", a figure for "how
many", a date for "when"); the constraints say what it must be about (the 2019 award, not the 2018 one). Neither is
a search term's weight: those come from the pages (select.py).
"""
from __future__ import annotations

import itertools
import re
from typing import Literal

from pydantic import BaseModel, Field

from .terms import IRREGULAR, POSSESSIVE_ENDS, STOP_WORDS, YEAR, content_terms, stem, strip_request, word_list

AnswerType = Literal["person", "organisation", "place", "name", "number", "date", "title", "other"]
# The types a sentence must carry a candidate of; "other" (what, why, how) asks for a description.
TYPED: frozenset[str] = frozenset({"person", "organisation", "place", "name", "number", "date", "title"})
NAMED: frozenset[str] = frozenset({"person", "organisation", "place", "name", "title"})

_HEADS: dict[str, frozenset[str]] = {
    "person": frozenset(word_list("""
        person people man woman men women boy girl player players actor actress author writer novelist poet
        president ceo chief executive official officer minister judge coach manager director founder cofounder
        scientist researcher artist singer musician rapper leader spokesman spokeswoman spokesperson senator
        congressman congresswoman lawmaker candidate winner champion captain driver pilot host journalist reporter
        editor economist analyst governor mayor chairman chairwoman chair head owner investor inventor designer
        engineer developer programmer maintainer astronaut star quarterback pitcher striker goalkeeper lawyer
        attorney prosecutor victim suspect son daughter father mother wife husband king queen prince princess
        pope ambassador secretary commissioner general admiral colonel creator producer composer filmmaker
        screenwriter showrunner commander activist entrepreneur billionaire businessman businesswoman doctor
        physician surgeon nurse teacher professor student soldier detective diplomat chancellor""")),
    "organisation": frozenset(word_list("""
        company companies firm firms team teams club clubs organisation organization agency group airline
        airlines bank banks network university college school party brand startup manufacturer carrier retailer
        publisher studio court department ministry government union league band newspaper channel broadcaster
        insurer utility automaker carmaker maker developer vendor provider charity foundation""")),
    "place": frozenset(word_list("""
        city cities country countries state states town village region province county venue place location
        airport stadium island continent nation capital district neighbourhood neighborhood street port site
        area river mountain lake base prison hospital court venue arena theatre theater""")),
    "date": frozenset(word_list("""
        year years date day days month time decade century season week weekend era night evening morning afternoon""")),
    "number": frozenset(word_list("""
        number amount percentage percent share proportion fraction rate price cost figure total score age
        population budget salary revenue profit loss value valuation speed distance length height weight size
        capacity margin version release pep rfc range duration sales earnings income""")),
    "title": frozenset(word_list("""
        book novel memoir film movie song album show series title game app episode play opera poem painting report
        paper study headline slogan motto law act bill treaty language exception error module function class
        method keyword package library operator account handle hashtag brand model journal magazine name
        nickname term word phrase""")),
}
DATE_HEADS: frozenset[str] = _HEADS["date"]
# The last words of names of organisations and places ("McDonald's Corporation", "Children's Hospital").
_KIND_ENDINGS: frozenset[str] = frozenset(stem(w) for w in _HEADS["organisation"] | _HEADS["place"] | set(word_list(
    "corporation corp inc ltd co society institute association foundation center centre museum hall")))
# Kinds of thing whose proper names carry the kind: "Wembley Stadium", "Bagram Air Base", "Harvard University", "the
# Nobel Prize". A sentence that answers "which stadium" says "stadium", or a sentence beside it does; a sentence
# that names no stadium answers another question. Classes named without the kind ("which city": "Paris"; "which
# company": "Apple") are not listed.
NAME_KINDS: frozenset[str] = frozenset(stem(w) for w in word_list("""
    stadium arena airport base prison jail hospital river lake island bridge station museum cathedral palace
    university college prize"""))
# A person's title or role before their name ("President Trump", "Rep. Ilhan Omar"): not what a page names them by.
TITLES: frozenset[str] = frozenset(stem(w) for w in _HEADS["person"] | set(word_list(
    "rep sen gov mr mrs ms dr premier")))
_HOW_NUMBER = re.compile(r"\bhow\s+(?:many|much|long|far|big|large|small|tall|high|low|short|old|often|fast|quickly|"
                         r"slowly|heavy|deep|wide|hot|cold|expensive|costly|soon)\b", re.I)
_OF_THE = re.compile(r"^\s*+of\s++(?:the|its|their|his|her|these|those)\s++", re.I)
_WHEN = re.compile(r"\b(?:when|since\s+when|by\s+when)\b", re.I)
_WHERE = re.compile(r"\bwhere\b", re.I)
_WHO = re.compile(r"\bwho(?:m|se)?\b", re.I)
# After "what is", the head follows "the" or a possessor ("What were Home Depot's total sales?").
_WHICH = re.compile(r"\b(?:which|what)\b(?P<the>\s+(?:is|was|are|were)(?:\s+the|(?=\s++(?-i:[A-Z])[\w.&-]*+"
                    r"(?:\s++(?-i:[A-Z])[\w.&-]*+)*+['’]s\b)))?(?P<rest>(?:\s+[\w'’.-]+){1,4})", re.I)
# Space runs are taken whole (`++`, `*+`): split between `\s+` and `\s*`, a long run was tried in quadratically
# many ways.
_NAME_OF = re.compile(r"\b(?:name|title)\s++of\s++(?:the|a|an|its|his|her|their)?\s*+(?P<head>[a-z]+)", re.I)
_WH_WORDS = frozenset(["which", "what", "who", "whom", "whose", "how", "when", "where", "why"])
_MONEY = re.compile(r"\bhow\s+much\b.*\b(?:cost|costs|pay|paid|pays|price|priced|worth|spend|spent|charge|charged|"
                    r"earn|earned|raise|raised|fund|funding|sell|sold|fetch|fine|fined|invest|invested|money|"
                    r"dollars|euros|pounds)\b|\bhow\s+(?:expensive|costly)\b", re.I)
_MONEY_HEADS = frozenset(word_list(
    "price cost fee salary budget revenue profit valuation fine wage worth earnings income"))
_CALLED = re.compile(r"what\b[^?]*\b(?:call|called|calls|name|named|dub|dubbed|title|titled|nickname|"
                     r"nicknamed)\b", re.I)
_CALLED_LAST = re.compile(r"\b(?:called|dubbed|titled|nicknamed)\s*+$", re.I)  # "What is X's approach called?"
_WH = re.compile(r"\b(?:how|what|which|who|whom|whose|when|where|why)\b", re.I)
_MONTH_DAY = re.compile(r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?\s+\d{1,2}\b")
_QUOTED = re.compile(r"[\"“«]([^\"“”«»]{2,80})[\"”»]")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,:-]\d+)*[a-z]?(?![\w])", re.I)
# A capitalised run: "Dubai Air Show", "Bank of England", "Red for Ed", "Patrick Carlineo Jr.", "787-9 Dreamliner",
# "iOS" (a word's lower-case start is taken whole, only before a capital). A digit with no ASCII letter after it in its
# word is matched too, to the word's end, as group "number" (skipped): failing as a name, it made the search start
# again at each digit after it and read on to the word's end (quadratic).
_NAME = re.compile(r"(?:(?:(?<![\w'’.-])[a-z]++(?=[A-Z]))?[A-Z][\w'’.-]*+|\d[\w.-]*[A-Za-z][\w.-]*+)"
                   r"(?:\s++(?:of|for|de|la|von|van|del|der|du|the|and|&)(?=\s+[A-Z])|\s++(?:[A-Z][\w'’.-]*+|\d[\w.-]*+))*+|(?P<number>\d[\w.-]*+)")
# Runs are taken whole (`++`, `*+`) where what follows cannot start with what they take. An attribution's space run
# is matched from its first character only ((?<!\s)): a search would otherwise start again at each character of a
# long run and read on to its end. After a relative pronoun, the old `\s+(?!(?:is|...)\b)` gave back one space when
# "is" followed (a run of two or more spaces matched): `\s(?=\s)` says so without retrying the clause per space.
_CLAUSE = r"[^,?;]*+"  # a clause's text up to its next comma
_DESCRIPTION = re.compile(
    r",\s++(?:the|a|an|his|her|its|their|who|whom|whose|which|that|known|best|widely|now|then|formerly|once|following|"
    rf"after|before|since|amid)\b{_CLAUSE}(?=,|\?|$)"
    rf"|,?(?<!\s)\s*+\b(?:according\s++to|as\s++reported\s++by|reported\s++by|cited\s++by)\b{_CLAUSE}"
    rf"|,\s*+per\s++(?:the\s++)?[A-Z]{_CLAUSE}"
    rf"|(?<=[A-Za-z])\s++(?:who|whose|which|that)(?:\s++(?!(?:is|was|are|were|did|does|do)\b)|\s(?=\s)){_CLAUSE}(?=,)",
    re.I)
# "... as its new president after Richard M. Stallman resigned in 2019?": a closing clause with its own named subject
# and past verb places the asked event in time, as ", after ..." does (descriptions keeps it only after what is asked).
_TIME_CLAUSE = re.compile(r"(?<=[A-Za-z])\s++(?i:after|before|following|since)\s++(?:[A-Z][\w.'’-]*+\s++)++"
                          r"[a-z]++(?<=ed)\b[^,?;]*+(?=\?|$)")
# A lowercase word right before a capitalised one: "co-founder Julian Assange" when it is one of TITLES (descriptions).
_BEFORE_NAME = re.compile(r"(?<![\w'’-])[a-z][a-z-]*+(?=\s++[A-Z])")
_LEADING_SOURCE = re.compile(rf"\s*((?:according\s+to|as\s+reported\s+by|per)\b{_CLAUSE}),", re.I)
# Capitalised words that start a question or clause rather than name something.
_NOT_NAMES = frozenset(word_list("""
    according what which who whom whose when where why how is are was were do does did can could will would should
    has have had in on at of for from by with after before during since the a an and or but if as to please tell
    give show list name explain describe find i also then so
"""))


# "What happened at X?" asks for what is said of X: its verb names no word an answer would use.
_EVENT_VERBS = frozenset(stem(w) for w in word_list("happen happened happens happening occur occurred occurs"))
_DEMONYM = re.compile(r"[A-Z][a-z]+(?:an|ian|ese|ish|ean|i)")
DATE_WORDS = frozenset(word_list("""
    january february march april may june july august september october november december jan feb mar apr jun jul
    aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday spring summer autumn fall
    winter
"""))


class Constraint(BaseModel):
    """Something the answer must be about: a name, year, date, number or quoted title, with its matching terms. A
    soft one (in an appositive, a relative clause or an "according to") describes rather than restricts."""

    kind: Literal["name", "year", "date", "number", "quoted"]
    text: str
    terms: list[str] = Field(default_factory=list)  # stemmed content terms of `text`
    soft: bool = False


class Focus(BaseModel):
    """What is asked: the wh-word, the head noun after it (if any), the type of answer it calls for, and the words that
    describe the answer rather than its topic ("old" in "how old", "company" in "which company": an answer sentence
    often says "48" or "Renault" without them)."""

    wh: str = ""
    head: str | None = None
    answer_type: AnswerType = "other"
    slot: list[str] = Field(default_factory=list)  # stemmed
    money: bool = False  # a sum of money is asked for ("how much did it cost", "what price"): a figure with a currency


class Part(BaseModel):
    """One part of a question: its text, focus, constraints and terms (its own, and those inherited as context)."""

    text: str
    focus: Focus = Field(default_factory=Focus)
    constraints: list[Constraint] = Field(default_factory=list)
    terms: list[str] = Field(default_factory=list)  # stemmed content terms of the part's core (what it asks)
    predicates: list[str] = Field(default_factory=list)  # stemmed verbs of the core: what is said of the answer
    described: list[str] = Field(default_factory=list)  # of its appositives, relative clauses and attributions
    context_terms: list[str] = Field(default_factory=list)  # from an earlier part or a statement it leans on
    # The earlier part whose answer this one's subject pronoun stands for ("Which nation won X, and whom did it
    # beat?"): no sentence answers this part when none answers that one (select.py).
    answer_of: Part | None = Field(None, repr=False)
    past: bool = False  # it asks what happened (asks_past): a sentence that only says it will or could happen does not
    # answer it


def _type_of_head(head: str) -> AnswerType | None:
    for kind, words in _HEADS.items():
        if head in words:
            return kind  # type: ignore[return-value]
    return None


def _head_after(text: str, *, after_article: bool = False) -> str | None:
    """The head noun after a wh-word: the last of the lowercase content words that follow it, before any other word
    ("which French company" -> "company", "what weekly value" -> "value", "how many school districts" ->
    "districts"), a figure or a past-tense verb ("which airline ordered 30" -> "airline"); a possessor is the head
    ("which company's shares" -> "company"); None when a verb comes first ("what caused"), unless `after_article`:
    after "what is the", a participle is an adjective ("the combined value" -> "value")."""
    run: list[str] = []
    words = re.findall(r"[\w'’-]+", text)[:5]
    for i, word in enumerate(words):
        if not run and len(word) > 1 and word.isupper():
            after = words[i + 1] if i + 1 < len(words) else ""
            nouns = list(itertools.takewhile(lambda w: _lower_word(w) and not _verb_like(w), words[i + 1:i + 3]))
            if not (after and _lower_word(after) and (any(_type_of_head(w.lower()) for w in nouns) or (
                    after_article and (after.endswith("ing") or not _verb_like(after))))):
                return word.lower()  # "which PEP", "which CEO runs"; not "the US starting price", "which US base"
        if not run and (word[:1].isupper() or word[:1].isdigit()):
            continue
        low = word.lower()
        if not run and i and low in ("and", "or") and words[i - 1][:1].isupper() and words[i + 1:i + 2] and (
                words[i + 1][:1].isupper()):
            continue  # "which Fargo and Legion creator": two names before one head

        if len(run) == 1 and low in ("and", "or") and len(words) >= i + 3 and all(
                _lower_word(w) and not _verb_like(w) for w in words[i + 1:i + 3]):
            continue  # "how many human and animal cases": two modifiers of one head, "cases"
        if low in STOP_WORDS or word[:1].isupper() or word[:1].isdigit():
            break
        if _verb_like(low) and not _type_of_head(low) and (run or not after_article):
            break
        if run and _present_verb(words, i):
            break  # "which company makes the 1Password manager", "what hospital employs Owen Dempsey"
        if low.endswith(("'s", "’s")):
            if after_article:
                run = []  # "what is the company's valuation": the possessor is not what is asked
                continue
            return low[:-2]
        run.append(low)
        if len(run) == 3:
            break
    return run[-1] if run else None


_WHO_IS = re.compile(r"\s*+who\s++(?:is|was|are|were)\s++(?:(?:the|an?)\s++)?", re.I)
# Person words that name nobody's role: a page names no one by them.
ANYONE = frozenset(word_list("person people man woman men women boy girl"))
# Person words that are no office a page would name the answer by ("Who was the man arrested ...?").
_NOT_OFFICES = ANYONE | frozenset(word_list("""
    player players author writer winner champion star victim suspect son daughter father mother wife husband host
    owner investor candidate"""))


def asked_office(text: str) -> list[str]:
    """The stems of the office a "Who is/was the <office> ...?" part asks about ("Who was Bolivia's interim
    president?" -> ["presid"]; "CEO" and "chief executive" as one), or []."""
    m = _WHO_IS.match(text)
    head = _head_after(text[m.end():]) if m else None
    if head is None or head in _NOT_OFFICES or _type_of_head(head) != "person":
        return []
    office = stem(head)
    return ["ceo", "chief", "execut"] if office in ("ceo", "chief", "execut") else [office]


def _slot(*words: str | None) -> list[str]:
    return [t for w in words if w for t in content_terms(w, stemmed=True)]


def focus_of(text: str) -> Focus:
    """The wh-word, head noun and answer type of one question part, read from its first wh-word on (a "who" in a
    relative clause later on does not make "What sentence did X, who ..., receive?" ask for a name)."""
    asked = strip_request(text)
    if m := _NAME_OF.search(asked):  # "the name of the interior minister": the head is "minister"
        head = _head_after(asked[m.start("head"):]) or m.group("head").lower()
        return Focus(wh="name", head=head, answer_type=_type_of_head(head) or "name", slot=_slot("name", head))
    first = _WH.search(asked)
    if first is None:
        return Focus()
    tail = re.split(r"[?!;:(]", asked[first.start():], maxsplit=1)[0]
    focus = _focus(tail, first.group().lower())
    if focus.answer_type == "number" and (_MONEY.search(tail) or focus.head in _MONEY_HEADS):
        focus.money = True
    return focus


def _focus(tail: str, wh: str) -> Focus:
    if m := _HOW_NUMBER.match(tail):
        head = _head_after(_OF_THE.sub("", tail[m.end():], count=1))  # "how many of the customers"
        # "How much did Trump weigh?": the verb names what is measured, which the answer tells by its unit ("243
        # pounds"), as "how old" is told by "48".
        measured = None if head or m.group().split()[-1].lower() != "much" else _verb_after_do(
            re.findall(r"[\w'’-]+", tail[m.end():]))
        return Focus(wh=m.group().lower(), head=head, answer_type="number",
                     slot=_slot(m.group().split()[-1], head if head and _type_of_head(head) else None, measured))
    if wh in ("which", "what") and (which := _WHICH.match(tail)) is not None and (
            head := _head_after(which.group("rest"), after_article=which.group("the") is not None)) is not None:
        # "What is Boeing's approach called?": a named owner's thing, called by a name (not "What is the file called?",
        # often lower case, nor "Which penalty was called?").
        owned = which.group("the") is not None and not which.group("the").lower().endswith("the")
        kind = _type_of_head(head) or ("title" if owned and _CALLED_LAST.search(tail) else None)
        return Focus(wh=wh, head=head, answer_type=kind or "other", slot=_slot(head if kind else None))
    if _CALLED.match(tail):
        return Focus(wh=wh, answer_type="title")  # "What did Boeing call its approach?", "What is it called?"
    if _WHEN.match(tail):
        return Focus(wh="when", answer_type="date")
    if _WHO.match(tail):
        return Focus(wh="who", answer_type="name")  # a person or an organisation ("who bought X?")
    if _WHERE.match(tail):
        return Focus(wh="where", answer_type="place")
    return Focus(wh=wh)


def constraints_of(text: str) -> list[Constraint]:
    """The names (capitalised runs past a clause's first word), years, month-and-day dates, other numbers and quoted
    phrases of `text`, each once."""
    found: dict[tuple[str, str], Constraint] = {}

    def add(kind: str, phrase: str) -> None:
        phrase = phrase.strip(" .,;:'’\"")
        terms = content_terms(phrase, stemmed=True)
        if phrase and terms and (kind, phrase.lower()) not in found:
            found[(kind, phrase.lower())] = Constraint(kind=kind, text=phrase, terms=terms)  # type: ignore[arg-type]

    for m in _QUOTED.finditer(text):
        add("quoted", m.group(1))
    for m in YEAR.finditer(text):
        add("year", m.group())
    for m in _MONTH_DAY.finditer(text):
        add("date", m.group())
    for m in _NAME.finditer(text):
        if m.group("number") is not None:
            continue
        words = m.group().split()
        led = _leads_a_name(text[max(0, m.start() - _LOOK_BACK):m.start()])
        while words and words[0].lower().strip(".,") in _NOT_NAMES:
            words.pop(0)  # "According to ...", a clause's first word
            led = True
        # "Kevin King and Timothy Weeks": two names. (?<!\s) and `++`: as in _DESCRIPTION.
        phrases = re.split(r"(?<!\s)\s++(?:and|&)\s++", " ".join(words))
        if not led:  # "won Iowa for Republicans", "swap LG for Panasonic": a verb's object and what it is for
            phrases = [p for phrase in phrases for p in re.split(r"(?<!\s)\s++for\s++", phrase)]
        for phrase in _possessors_apart(phrases):
            words_of = phrase.split()
            if phrase and not (any(w.lower().strip(".,") in DATE_WORDS for w in words_of) and all(
                    w.lower().strip(".,") in DATE_WORDS or w.strip(".,").isdigit() for w in words_of)):
                add("name", phrase)  # "November 2019" and "March 15" are dates, not names
    years = {c.text for c in found.values() if c.kind == "year"}
    for m in _NUMBER.finditer(text):
        if m.group() not in years and not any(m.group() in c.text for c in found.values() if c.kind != "year"):
            add("number", m.group())
    return list(found.values())


_LOOK_BACK = 40  # characters before a capitalised run that hold the word before it (a bound, not tuned)


def _leads_a_name(before: str) -> bool:
    """Whether the text `before` a capitalised run lets "for" inside the run join one name ("the Red for Ed rally",
    "the 2019 Red for Ed rally", "did Americans for Prosperity"): nothing, a clause's end, a function word ("the",
    "by", "did"), a figure or a possessive; not a verb ("won Iowa for Republicans")."""
    words = before.split()
    if not words or before.rstrip()[-1:] in ",;:(\"“":
        return True
    last = words[-1]
    return last.lower() in _NOT_NAMES or last[:1].isdigit() or last.endswith(POSSESSIVE_ENDS)


# Possessives inside a name ("People's Republic", "St. John's University", "Women's World Cup").
_NAME_POSSESSORS = frozenset(word_list("people children women men st st. saint"))


def _possessors_apart(phrases: list[str]) -> list[str]:
    """Each phrase, a possessor apart from what it owns ("Michigan's EEE" -> "Michigan's", "EEE"), unless the
    possessive is part of one name: a generic possessor ("Women's World Cup"), what follows starts with "of"
    ("Lloyd's of London") or ends in a kind of organisation or place ("McDonald's Corporation", "St. John's
    University")."""
    out = []
    for phrase in phrases:
        words = phrase.split()
        at = next((i for i, w in enumerate(words[:-1]) if w.endswith(("'s", "’s"))), None)
        if at is None or words[at][:-2].lower() in _NAME_POSSESSORS or words[at + 1] == "of" or stem(
                words[-1].lower()) in _KIND_ENDINGS:
            out.append(phrase)
        else:
            out += [" ".join(words[:at + 1]), " ".join(words[at + 1:])]
    return out


def descriptions(text: str) -> list[tuple[int, int, str]]:
    """Spans of `text` that describe rather than ask: an appositive or relative clause set off by commas (", the
    New York man who ...,"), a relative clause after a name, an attribution ("according to Snopes"), a closing time
    clause and a title before a name; each with what stands in its place in the question's core (a comma after a
    title, so the names either side stay two: "WikiLeaks", "Julian Assange")."""
    first = _WH.search(text)
    asked_at = first.end() if first else 0  # the question's own wh-word ("To which base ...") describes nothing
    lead = _LEADING_SOURCE.match(text)  # "According to X, how many ...": the attribution before the question
    spans = [(*m.span(), "") for m in _DESCRIPTION.finditer(text) if m.start() >= asked_at]
    spans += [(*m.span(), "") for m in _TIME_CLAUSE.finditer(text, asked_at)
              if len(content_terms(text[asked_at:m.start()])) >= 2]  # not "What happened after X resigned?"
    # "How old is WikiLeaks co-founder Julian Assange?": a title before a name says who is meant, not what is asked
    # (a sentence that answers calls him "Assange, 48,").
    spans += [(*m.span(), ",") for m in _BEFORE_NAME.finditer(text, asked_at)
              if stem(m.group().rsplit("-", 1)[-1]) in TITLES and not any(a <= m.start() < b for a, b, _ in spans)]
    return ([(*lead.span(1), "")] if lead else []) + sorted(spans)


def analyse_part(text: str, context_terms: list[str] | None = None) -> Part:
    """One part's focus, constraints and terms; `context_terms` are stemmed terms it leans on (an earlier part)."""
    spans = descriptions(text)
    starts, ends = [0] + [b for _, b, _ in spans], [a for a, _, _ in spans] + [len(text)]
    core = "".join(text[a:b] + left for a, b, left in zip(starts, ends, [*(left for *_, left in spans), ""],
                                                          strict=True))
    described_text = " , ".join(text[a:b] for a, b, _ in spans)
    own = [t for t in content_terms(strip_request(core), stemmed=True) if t not in _EVENT_VERBS]
    described = [t for t in content_terms(described_text, stemmed=True) if t not in own]
    extra = [t for t in dict.fromkeys(context_terms or []) if t not in own and t not in described]
    constraints = [c.model_copy(update={"soft": True}) if _DEMONYM.fullmatch(c.text) else c
                   for c in constraints_of(core)]  # "the American safety net": a description, not a name to find
    constraints += [c.model_copy(update={"soft": True}) for c in constraints_of(described_text)]
    unique: dict[tuple[str, str], Constraint] = {}
    for c in constraints:
        unique.setdefault((c.kind, c.text.lower()), c)
    return Part(text=text, focus=focus_of(text), constraints=list(unique.values()), terms=own, described=described,
                predicates=predicates_of(core), context_terms=extra, past=asks_past(core))


def predicates_of(core: str) -> list[str]:
    """The verb of a question whose wh-phrase is its subject: the word after the wh-phrase ("Which firm won ...",
    "Who founded ...", "How many people signed up ..."), or after an auxiliary there ("Which maker will power ...",
    "How many people were arrested ..."); [] for "What did X say", "Who is the CEO?", "How old is X?"."""
    words = re.findall(r"[\w'’-]+", strip_request(core))
    first = next((i for i, w in enumerate(words) if w.lower() in _WH_WORDS), None)
    if first is None or first > 2:  # the question's own wh-phrase, not a relative "who" later on
        return []
    wh, i = words[first].lower(), first + 1
    counted = wh == "how" and i < len(words) and words[i].lower() in ("many", "much")
    if wh == "how":
        i += 1  # past "many" ("how many people signed"), or past the adjective ("how old is": no verb follows)
    if wh in ("which", "what", "whose") or counted:
        while i < len(words) and words[i][:1].isupper() and i - first <= 2:
            i += 1  # "which French company"
        head = i
        while i < len(words) and _lower_word(words[i]) and not _verb_like(words[i]) and i - head < 3 and not (
                i > head and _present_verb(words, i)):
            i += 1  # the head noun of "which architecture firm", "how many people"
        if i == head and wh != "how":
            return []  # "What caused ...", "What sentence did ...": no head noun, so no verb is told apart
    if i + 1 < len(words) and (words[i].lower() in _MODALS or words[i].lower() in _AUXILIARIES and _verb_like(
            words[i + 1])) and (wh != "who" or i == first + 1):
        i += 1  # "were arrested", "has signed", "will power"; not "had consumers bought" (its subject follows)
    if i < len(words) and _lower_word(words[i]):
        return content_terms(words[i].lower(), stemmed=True)
    if i < len(words) and words[i].lower() in _BE:
        # A passive with its agent: "On what date was the deal signed by X?": the participle after the subject.
        for j in range(i + 1, len(words) - 1):
            if _lower_word(words[j]) and _verb_like(words[j]) and words[j + 1].lower() == "by":
                return content_terms(words[j].lower(), stemmed=True)
    return []


def _verb_after_do(words: list[str]) -> str | None:
    """The verb of "did" + a named subject + verb at the start of `words` ("did President Donald Trump weigh" ->
    weigh); None when there is none, or when unsure where the subject ends."""
    if len(words) < 3 or words[0].lower() not in _DO:
        return None
    j = next((k for k in range(1, len(words)) if not words[k][:1].isupper()), len(words))
    if j == 1 or words[j - 1].lower().endswith(POSSESSIVE_ENDS):
        return None  # "did the company sell", "did Coty's unit sell": the subject goes on past a name
    while j < len(words) and (words[j].lower() in _ADVERBS or words[j].lower().endswith("ly")):
        j += 1  # "did Michael McDonald first join"
    if j + 1 < len(words) and words[j + 1][:1].isupper():
        return None  # "does NASA administrator Jim Bridenstine say": a title inside the subject, or a verb? Unsure
    return words[j].lower() if j < len(words) and _lower_word(words[j]) else None


def did_verb(text: str) -> str | None:
    """The stemmed verb of "did <subject> <verb>" among a question's first words ("When did Coty close its deal?" ->
    "close"), or None when it has none or its subject's end is unclear."""
    words = re.findall(r"[\w'’-]+|[^\w\s]", strip_request(text))
    at = next((i for i, w in enumerate(words[:8]) if w.lower() == "did"), None)
    if at is None:
        return None
    run = 0  # open words in a row: the subject's nouns, then the verb ("Hong Kong police lift the cordon")
    for j in range(at + 1, min(len(words), at + 10)):
        run = run + 1 if _open_word(words[j]) else 0
        if run and not (j + 1 < len(words) and _open_word(words[j + 1])):
            # Three in a row is a noun phrase or a verb with its object ("the law take effect"): unclear.
            return stem(words[j].lower()) if run <= 2 else None
    return None


def _open_word(word: str) -> bool:
    """A lowercase word that is no function word or possessive: a noun, verb, adjective or adverb."""
    return word.isalpha() and word.islower() and word not in _FUNCTION_WORDS


# Not STOP_WORDS: those hold verbs a question asks with ("get", "say", "make"), which did_verb must find.
_FUNCTION_WORDS = frozenset(word_list("""
    the a an its his her their our my your this that these those of for to in on at by with from about into over
    after before as and or but than against during since until without under through across among per via it he
    she they we you him them us not never be been being is are was were has have had do does will would could can
    may might shall should must"""))


_BE = frozenset(word_list("is was are were"))
_PAST = re.compile(r"\b(?:did|was|were|had)\b", re.I)


def asks_past(core: str) -> bool:
    """Whether a question part asks what happened: its auxiliary or its verb is in the past ("What sentence did he
    receive?", "Where was the deal signed?", "Which firm won?")."""
    return bool(_PAST.search(core)) or any(
        _verb_like(w) and w.lower() not in ("born", "known") and not w[:1].isupper()
        for w in re.findall(r"[\w'’-]+", strip_request(core)))


_AUXILIARIES = frozenset(word_list("is was are were be been has have had"))
_MODALS = frozenset(word_list("will would could can may might shall should"))
_DO = frozenset(word_list("did does do"))
_ADVERBS = frozenset(word_list("first also ever still just then later once again last"))


def _verb_like(word: str) -> bool:
    """A past tense or participle after a wh-phrase's noun: "won", "bought", "signed" (not "red" or "bed")."""
    low = word.lower()
    return low in IRREGULAR or len(low) > 4 and low.endswith("ed")


def _present_verb(words: list[str], i: int) -> bool:
    """Whether words[i], after a singular noun, is a verb in the present ("company makes the app")."""
    low, before = words[i].lower(), words[i - 1].lower() if i else ""
    after = words[i + 1] if i + 1 < len(words) else ""
    # A word in -s before a name, a figure, an article or a pronoun; after a plural it is a noun ("video games
    # Nintendo released").
    return len(low) > 3 and _in_s(low) and not _in_s(before) and bool(after) and (
        after[:1].isupper() or after[:1].isdigit() or after.lower() in _OBJECT_STARTS)


def _in_s(word: str) -> bool:
    return word.endswith("s") and not word.endswith(("ss", "us", "is"))


_OBJECT_STARTS = frozenset(word_list("the a an its his her their this that these those it them"))


def _lower_word(word: str) -> bool:
    return word.lower() not in STOP_WORDS and not word[:1].isupper() and not word[:1].isdigit()
