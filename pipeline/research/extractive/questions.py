"""Split a question into at most `max_parts` parts, each a sub-question with its analysis (analysis.py) and 2-3
search queries, in code (no model).

A part is a question of its own: another sentence that asks, or a clause after "and", ";" or a comma that opens a
question ("..., and when did it ...", "... and in which year ...", "When and where ..."). Appositives, relative and
subordinate clauses ("Patrick Carlineo Jr., who ...", "after ...", "according to ...") stay inside their part as
constraints. A statement ("I read that X ...") is context for the parts after it, never a part.
"""
from __future__ import annotations

import re

from pydantic import BaseModel, Field

from .analysis import NAMED, Part, analyse_part
from .sentences import STARTERS
from .terms import ABBREVIATIONS, IRREGULAR, QUESTION_WORDS, STOP_WORDS, content_terms, strip_request, word_list

__all__ = ["SubQuery", "SplitResult", "split_question", "split_question_result", "content_terms",
           "MAX_QUESTION_CHARS"]

MAX_QUESTION_CHARS = 1000  # longer questions are cut at a sentence or word boundary before this
MAX_PIECES = 40  # bounded work: pieces considered before capping, whatever the input
MAX_QUERY_CHARS = 200
MAX_QUERY_TERMS = 12

_AUXILIARIES = frozenset(word_list("""
    is are was were do does did can could will would should has have had may might must
"""))
WH_PHRASE_WORDS = 4  # "in which host city": a preposition, the wh-word and a head noun with its modifier (not tuned)
_CLAUSE_OPENERS = QUESTION_WORDS | _AUXILIARIES  # "... and how much does it cost?", "... and did it ...?"
_WH_WORD = re.compile(r"\b(?:what|which|when|where|why|how|whom)\b", re.I)
_CONDITION = re.compile(r"^\s*(?:if|suppose|supposing|assuming|given)\b", re.I)
# After a comma, only these wh-words open a question of their own ("..., when did it ..."): "who", "which" and
# "that" after a comma open a relative clause ("Patrick Carlineo Jr., who ...").
_COMMA_OPENERS = frozenset(["what", "when", "where", "why", "how"])
_PRONOUNS = frozenset(word_list("""
    it its they them their that these those he she his her him
"""))  # not "this": "this year's" leans on nothing
_PERSONAL = frozenset(word_list("he she his her him"))
_NO_LIST = re.compile(r"\b(?:compare[ds]?|comparison|versus|vs|differ\w*|between|both|together|combined|total|"
                      r"sum|ratio|relationship)\b", re.I)
_QUESTION_MARKS = "?？؟"
_ENDS = _QUESTION_MARKS + "!;。！"
_HARD_END = re.compile(r"[?？؟!;。！]+|\n+")
_ACRONYM = re.compile(r"[A-Z]{2,4}")
# Words that may stand between "and" and the wh-word of a question of its own ("and roughly how many").
_LEADS = frozenset(word_list("according roughly approximately exactly nearly about around precisely specifically also"))
_STOP_THEN_CAPITAL = re.compile(r"\.[\"'”’)]*\s+(?=[\"“¿¡(]?[A-Z])")
# "and"/";" before a clause, or a comma before a question word: the right side may be a question of its own.
# A space run is matched from its first character only ((?<!\s)), and whole (`++`: a word follows): a search would
# otherwise start again at each character of a long run and read on to its end.
_JOIN = re.compile(r",?(?<!\s)\s++(?:and(?:\s++also)?|as\s++well\s++as|plus|but)\s++(?=(?P<a>\w+)(?:\s++(?P<a2>\w+))?"
                   r"(?:\s++(?P<a3>\w+))?)"
                   r"|;\s*+(?=(?P<b>\w+))|,\s++(?=(?P<c>what|when|where|why|how|which|who)\b(?:\s++(?P<c2>\w+))?"
                   r"(?:\s++(?P<c3>\w+))?)", re.I)
# "When and where was X born?", "When, and where, was X born?": two wh-words sharing the rest of the question.
_TWO_WH = re.compile(r"^\s*(?P<a>who|what|when|where|why|how|which)(?:\s*+,)?\s++(?:and|or|&)\s++"
                     r"(?P<b>who|what|when|where|why|how|which)\b,?(?P<rest>.*)$", re.I | re.S)
_LIST_SEP = re.compile(r",\s++(?:(?:and|or)\s++)?|(?<!\s)\s++(?:and|or)\s++", re.I)  # (?<!\s): as in _JOIN
_WORD = re.compile(r"[\w'’.-]+")
# Every run is taken whole (`*+`, `++`): what may follow never starts with what the run takes, so giving back
# characters could only fail again (in quadratic time: "\d[\d.,%]*\w*" on a long number).
_ENTITY = re.compile(r"\b(?:[A-Z][\w'’.-]*+|\d[\d.,%]*+\w*+)"
                     r"(?:\s++(?:[A-Z][\w'’.-]*+|\d[\d.,%]*+|(?:of|de|la|von|van)\b))*+")
_PARTICLES = ("of", "de", "la", "von", "van")  # in a name, never its last word
_QUOTED = re.compile(r"[\"“”«»](?P<q>[^\"“”«»]{2,80})[\"“”«»]")


class SubQuery(BaseModel):
    """One sub-question, the search queries that research it (empty when it has no content words), its analysis."""

    question: str
    queries: list[str] = Field(default_factory=list)
    part: Part | None = Field(None, exclude=True, repr=False)


class SplitResult(BaseModel):
    """The sub-questions researched (at most max_parts), those dropped by the cap, and whether the input was cut."""

    parts: list[SubQuery] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list)
    truncated: bool = False


def _truncate(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, at the last sentence end, else the last space, before the limit."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = max(head.rfind(c) for c in _ENDS + ".\n")
    if cut < limit // 2:
        cut = head.rfind(" ")
    return head[: cut + 1 if cut > 0 else limit].rstrip()


def _sentences(text: str) -> list[str]:
    """`text` split after ?, !, ;, newlines, and at ". " before a capital unless the word is an abbreviation."""
    out: list[str] = []
    start = 0
    for m in _HARD_END.finditer(text):
        out.append(text[start:m.end()])
        start = m.end()
    out.append(text[start:])
    sentences: list[str] = []
    for chunk in out:
        begin = 0
        for m in _STOP_THEN_CAPITAL.finditer(chunk):
            words = chunk[begin:m.start()].split()
            last = words[-1].lower().strip("\"'“”(") if words else ""
            if not last or last in ABBREVIATIONS or len(last.rstrip(".")) == 1 and last[:1].isalpha():
                continue
            if _ACRONYM.fullmatch(words[-1]) and _asks(chunk[begin:m.start()]) and not _opens(chunk[m.end():]):
                continue  # "What drag did VW achieve for the ID. SPACE VIZZION?": a name's stop inside a question
            sentences.append(chunk[begin:m.start() + 1])
            begin = m.end()
        sentences.append(chunk[begin:])
    return [s.strip() for s in sentences if s.strip()]


def _first_word(text: str) -> str:
    return text.split(" ", 1)[0].lower().strip("¿¡\"“(")


def _opens(rest: str) -> bool:
    """Whether `rest` starts a question, a request or a sentence ("What ...", "Tell me ...", "It ...")."""
    first = _first_word(rest)
    return first in _CLAUSE_OPENERS or first in STARTERS or strip_request(rest) != rest


def _opens_question(m: re.Match[str]) -> bool:
    """Whether the clause after the join `m` asks a question of its own: a wh-word, a preposition and a wh-word ("in
    which year"), an auxiliary ("did it ..."); after a bare comma only what/when/where/why/how with an auxiliary or
    "much"/"many" next ("..., when did it ..."), or "which" with a noun and an auxiliary ("..., which languages are
    spoken?"), or "who" with an auxiliary and "its" ("..., who is its leader?"), never a relative clause ("..., who
    was ...", "..., which is ...", "..., when he was ...")."""
    if m.group("b"):
        return True
    first = (m.group("a") or m.group("c") or "").lower()
    second = (m.group("a2") or m.group("c2") or "").lower()
    if m.group("c") and first == "who":  # "..., who is its leader?", not "..., who is the CEO, said"
        return second in _AUXILIARIES and (m.group("c3") or "").lower() in ("its", "their")
    if m.group("c") and first == "which":  # "..., which languages are spoken?", not "..., which is based in"
        third = (m.group("c3") or "").lower()
        return second not in _AUXILIARIES and second not in _PRONOUNS and third in _AUXILIARIES
    if m.group("c"):
        return second in _AUXILIARIES or first == "how" or (first == "what" and second not in _PRONOUNS)
    third = (m.group("a3") or "").lower()
    # "and in which year", "and according to whom", "and roughly how many"; not a relative clause after a noun ("and
    # criminals who had").
    led = first in STOP_WORDS or first in _LEADS
    return first in _CLAUSE_OPENERS or led and (second in QUESTION_WORDS or third in QUESTION_WORDS and first != "the")


def _clauses(sentence: str) -> list[str]:
    """`sentence` split where a clause that asks a question of its own starts (see _opens_question)."""
    both = _TWO_WH.match(sentence)
    if both:  # "When and where was X born?" -> "When was X born?", "Where was X born?"
        rest = both.group("rest")
        return [f"{both.group('a')}{rest}", f"{both.group('b')}{rest}"]
    out, start = [], 0
    for m in _JOIN.finditer(sentence):
        if m.start() > start and _opens_question(m) and content_terms(sentence[start:m.start()]):
            out.append(sentence[start:m.start()])
            start = m.end()
    out.append(sentence[start:])
    return _shared_rest([c.strip(" ,;") for c in out if c.strip(" ,;")])


def _wh_phrase(text: str) -> bool:
    """A wh-phrase and nothing else: "On what date", "where", "in which city" (at most WH_PHRASE_WORDS words)."""
    words = text.split()
    return 0 < len(words) <= WH_PHRASE_WORDS and any(w.lower() in QUESTION_WORDS for w in words)


def _shared_rest(clauses: list[str]) -> list[str]:
    """"On what date, and where, was X signed?" -> "On what date was X signed?", "where was X signed?": a clause that
    is a wh-phrase alone asks about the rest of the next clause, set off after that clause's own wh-phrase."""
    out = list(clauses)
    for i in range(len(out) - 1):
        head, comma, rest = out[i + 1].partition(",")
        if comma and rest.strip() and _wh_phrase(out[i]) and _wh_phrase(head):
            out[i], out[i + 1] = f"{out[i]} {rest.strip()}", f"{head} {rest.strip()}"
    return out


def _is_name(word: str) -> bool:
    return word[:1].isupper() and word.lower() not in STOP_WORDS


def _expand_list(clause: str) -> list[str]:
    """"What were the revenue, profit and staff of Acme?" -> one question per item, when the clause holds a
    list of three or more short items (a comma list ending in "and"/"or") and asks no comparison."""
    if _NO_LIST.search(clause):
        return [clause]
    seps = list(_LIST_SEP.finditer(clause))
    for i in range(len(seps) - 1):
        run = seps[i:]
        if not run[0].group().lstrip().startswith(","):
            continue
        last = next((j for j, m in enumerate(run) if re.search(r"\b(?:and|or)\b", m.group(), re.I)), None)
        if not last:
            continue
        run = run[: last + 1]
        if not all(m.group().lstrip().startswith(",") for m in run[:-1]):
            continue
        middles = [clause[a.end():b.start()] for a, b in zip(run, run[1:], strict=False)]
        if not all(1 <= len(_WORD.findall(m)) <= 3 for m in middles):
            continue
        width = max(len(_WORD.findall(m)) for m in middles)
        head_words = list(_WORD.finditer(clause[: run[0].start()]))
        tail_words = list(_WORD.finditer(clause, run[-1].end()))
        if len(head_words) <= width or len(tail_words) < width:
            continue
        first, end = len(head_words) - width, width - 1
        while first > 1 and _is_name(head_words[first - 1].group()) and _is_name(head_words[first].group()):
            first -= 1  # "of Google Stadia, ..." keeps the whole name as the first item
        while end + 1 < len(tail_words) and _is_name(tail_words[end + 1].group()):
            end += 1  # "... and Apple Arcade" keeps the whole name as the last item
        first_start, last_end = head_words[first].start(), tail_words[end].end()
        head, tail = clause[:first_start], clause[last_end:]
        items = [clause[first_start:run[0].start()], *middles, clause[run[-1].end():last_end]]
        if not content_terms(head + tail) or not all(content_terms(it) for it in items):
            continue
        if any(it.split()[0].lower() in STOP_WORDS for it in items) or len({it[:1].isupper() for it in items}) > 1:
            continue  # "the series, the one Fargo and Legion ..." is an appositive, not a list of like items
        return [f"{head}{item.strip()}{tail}" for item in items]
    return [clause]


# The auxiliaries a bare verb follows ("does the tour start"), and the words that leave a verb pair's subject
# ("What did the Fed say about rates and inflation?": the pair is the object of "about", not two verbs).
_BARE_AUXILIARIES = frozenset(word_list("do does did will would can could"))
_PREPOSITIONS = frozenset(word_list("about of in for on with to from by at into over under after before against"))
_MORE_IRREGULAR = frozenset(word_list("made shown"))  # participles that terms.IRREGULAR does not list


def _verb_pair(clause: str) -> list[str]:
    """"Where does the tour start and end?" -> two parts, "... start?" and "... end?": the verbs of one subject."""
    words = clause.rstrip(" ?.!").split()
    if len(words) < 5 or words[-2].lower() != "and" or _NO_LIST.search(clause) or words[0].lower() not in (
            QUESTION_WORDS):
        return [clause]
    a, b, before = words[-3], words[-1], words[-4]
    if not all(w.isalpha() and w.islower() and len(w) > 2 and w not in STOP_WORDS for w in (a, b)):
        return [clause]
    lowered = [w.lower() for w in words[1:-3]]
    aux = next((i for i, w in enumerate(lowered) if w in _BARE_AUXILIARIES or w in ("was", "were")), None)
    if aux is None or before.lower() in STOP_WORDS or not before.isalpha() or _PREPOSITIONS & set(lowered[aux:]):
        return [clause]
    if lowered[aux] in ("was", "were") and not all(_participle(w) for w in (a, b)):
        return [clause]  # "What was the firm's revenue and profit?": nouns after "was"
    head = " ".join(words[:-3])
    return [f"{head} {a}?", f"{head} {b}?"]


# What a noun phrase after ", and" must not hold to be a second subject of the same "What was": a word that opens a
# clause of its own ("..., and the firm that bought it").
_CLAUSE_WORDS = _CLAUSE_OPENERS | frozenset(word_list("that"))
_DETERMINERS = frozenset(word_list("the its their his her"))
_BE_ASK = frozenset(word_list("is was are were"))
MAX_ELIDED_WORDS = 8  # a noun phrase, not a sentence (not tuned)


def _elided(clause: str) -> list[str]:
    """"What was the score on Nov. 18, and the Chargers' record afterward?" -> "What was the score on Nov. 18?",
    "What was the Chargers' record afterward?": a noun phrase after the last ", and" that names what it is about (a
    capitalised word) asks the same "What/Who was"."""
    head, sep, tail = clause.rstrip(" ?.").rpartition(", and ")
    words, lead = tail.split(), head.split()[:2]
    if len(lead) < 2 or lead[0].lower() not in ("what", "who") or lead[1].lower() not in _BE_ASK or _NO_LIST.search(
            clause):
        return [clause]  # "What is the relationship between the Fed, and the Treasury?"
    if words[0].lower() not in _DETERMINERS or len(words) > MAX_ELIDED_WORDS or "," in tail or any(
            w.lower() in _CLAUSE_WORDS for w in words) or not any(w[:1].isupper() for w in words[1:]):
        return [clause]  # "..., and the median income" would lose what it is of
    if "," in head and not head.rsplit(",", 1)[1].strip()[:1].isdigit():
        return [clause]  # a list or title: "of France, Germany, and the Netherlands", "The Good, the Bad, and the Ugly"
    return [f"{head}?", f"{' '.join(lead)} {tail}?"]


def _noun_pair(clause: str) -> list[str]:
    """"What drag coefficient and EPA range does the car have?" -> "What drag coefficient does the car have?", "What
    EPA range does the car have?": two things asked by one wh-word, before the verb's helper."""
    words = clause.split()
    if not words or words[0].lower() not in ("what", "which") or _NO_LIST.search(clause):
        return [clause]
    at = next((i for i, w in enumerate(words) if w.lower() in _AUXILIARIES), len(words))
    joins = [i for i in range(2, at) if words[i].lower() == "and"]
    if len(joins) != 1 or at == len(words):
        return [clause]
    first, second = words[1:joins[0]], words[joins[0] + 1:at]
    # At most two words a side, the second no longer than the first, the first ending in a lower-case noun: "Which
    # NBA and NFL teams", "What Star Wars and Marvel movies", "What Windows 11 and macOS versions" are modifiers of
    # one noun, one thing asked.
    if not 1 <= len(second) <= len(first) <= 2 or not first[-1].isalpha() or not first[-1].islower():
        return [clause]
    rest = " ".join(words[at:])
    return [f"{words[0]} {' '.join(first)} {rest}", f"{words[0]} {' '.join(second)} {rest}"]


def _participle(word: str) -> bool:
    """A past participle: "raised", or an irregular one ("born", "held", "made")."""
    return word.endswith("ed") or word in IRREGULAR or word in _MORE_IRREGULAR


def _tidy(part: str, ask: bool) -> str:
    part = " ".join(part.split()).strip(" ,;:")
    part = re.sub(r"^(?:and|also|plus|but|or|so)\s+", "", part, flags=re.I).strip(" ,;:")
    asked = strip_request(part)
    if asked and asked.split(" ", 1)[0].lower() in _CLAUSE_OPENERS:
        part, ask = asked, True  # "Please tell me who founded X" -> "Who founded X?"
    if not part:
        return part
    if not re.match(r"[a-z][a-z0-9+.-]*://", part, re.I):  # a URL keeps its own spelling
        part = part[0].upper() + part[1:]
    if ask and part[-1] not in _ENDS + ".":
        part += "?"
    return part


def _entities(text: str) -> list[str]:
    """Quoted phrases, capitalised runs (not the sentence's first word) and numbers of `text`."""
    found = [m.group("q").strip() for m in _QUOTED.finditer(text)]
    for m in _ENTITY.finditer(text):
        phrase = _without_last_particles(m.group().strip(" .,"))  # "Bank of" -> "Bank"
        if m.start() == 0 or not phrase or phrase.lower() in STOP_WORDS:
            continue  # the first word is capitalised because it starts the sentence
        found.append(phrase)
    return list(dict.fromkeys(found))


def _without_last_particles(phrase: str) -> str:
    """`phrase` (which ends in no line break) without the particles that end it, each with the spaces before it:
    "Bank of" -> "Bank", "Gulf of  de" -> "Gulf"; "of" alone stays."""
    end = len(phrase)
    while (word := next((w for w in _PARTICLES if phrase.endswith(w, 0, end)), None)) is not None:
        start = end - len(word)
        while start > 0 and phrase[start - 1].isspace():
            start -= 1
        if start == end - len(word):
            break  # no space before it: the end of a word ("Angola"), not a particle
        end = start
    return phrase[:end]


def _leans(question: str, terms: list[str]) -> bool:
    """Whether `question` leans on an earlier part for its topic: a pronoun (but "he", "she" after a name of its own),
    or a single content word."""
    words = re.findall(r"\w+", question)
    first = next((i for i, w in enumerate(words) if w.lower() in _PRONOUNS), None)
    if first is not None and words[first].lower() in _PERSONAL and any(_is_name(w) for w in words[1:first]):
        return len(terms) < 2  # "did Trump say he asked": "he" is the part's own Trump, not an earlier part's
    return first is not None or len(terms) < 2


_SUBJECTS = frozenset(word_list("it they he she"))
_ASKING_AUXILIARIES = frozenset(word_list("did does do was were is are has have had will would can could"))


def _answer_subject(question: str, previous: Part) -> bool:
    """Whether `question`'s subject is a pronoun for the answer of `previous`: `previous` asks for a name as the
    subject of its verb ("Which nation won ...", "Who founded ...") and `question` has a pronoun as the subject
    after its auxiliary ("whom did it beat", "when did he die")."""
    if previous.focus.answer_type not in NAMED or not previous.predicates:
        return False
    words = [w.lower() for w in re.findall(r"\w+", question)]
    return any(a in _ASKING_AUXILIARIES and b in _SUBJECTS for a, b in zip(words, words[1:], strict=False))


def _queries(question: str, inherited: list[str]) -> list[str]:
    """The question itself, its content words (plus `inherited`: the topic of the part it leans on and the words of
    statements before it), and its names/numbers when it has some: 2-3 distinct queries (1 when the question is a
    single word)."""
    terms = content_terms(strip_request(question))
    if not terms:
        return []
    extra = [t for t in dict.fromkeys(inherited) if t not in terms]
    queries = [question[:MAX_QUERY_CHARS].strip(), " ".join((terms + extra)[:MAX_QUERY_TERMS])]
    ents = _entities(question)
    if ents:
        queries.append(" ".join(f'"{e}"' if " " in e else e for e in ents)[:MAX_QUERY_CHARS].strip())
    seen, out = set(), []
    for q in queries:
        key = " ".join(re.findall(r"\w+", q.lower()))
        if key and key not in seen:
            seen.add(key)
            out.append(q)
    return out[:3]


def _asks(sentence: str) -> bool:
    """A question or a request ("Tell me ...", "List ..."), not a statement giving context ("If I call ...")."""
    if _CONDITION.match(sentence) and not sentence.rstrip().endswith("?"):
        return False
    asked = strip_request(sentence)
    first = _first_word(asked)
    return (sentence.rstrip()[-1:] in _QUESTION_MARKS or asked != sentence or first in _CLAUSE_OPENERS
            or bool(_TWO_WH.match(asked)) or bool(_WH_WORD.search(asked)))


def _pieces(text: str) -> list[tuple[str, str]]:
    """(piece, kind) for each part of `text`: "ask" for a clause that asks, "context" for a statement; at most
    MAX_PIECES. A text in which nothing asks (keywords, a statement) is one piece that asks."""
    sentences = _sentences(text)
    if not any(_asks(s) for s in sentences):
        sentences, forced = [" ".join(sentences)], True
    else:
        forced = False
    out: list[tuple[str, str]] = []
    for sentence in sentences:
        if not forced and not _asks(sentence):
            out.append((sentence, "context"))
            continue
        clauses = _clauses(sentence)
        for n, clause in enumerate(clauses):
            if len(clauses) > 1 and not _asks(clause) and (n < len(clauses) - 1 or _CONDITION.match(clause)):
                out.append((clause, "context"))  # "If I call zip() ..., what ...?", "X has a nickname; what is it?"
                continue
            for item in (items for elided in _elided(clause) for paired in _noun_pair(elided)
                         for listed in _expand_list(paired) for items in _verb_pair(listed)):
                out.append((item, "ask"))
                if len(out) >= MAX_PIECES:
                    return out
    return out


def split_question_result(question: str, max_parts: int = 4) -> SplitResult:
    """Split `question` into at most `max_parts` parts; the rest are listed in `dropped`.

    Parts are the sentences that ask and, inside them, the clauses that ask a question of their own and the items
    of a list of three or more ("the revenue, profit and staff of X"); statements are context. A part that leans on
    an earlier one (a pronoun, an elliptical "and why?") takes that part's terms as context, and an elliptical part
    is shown with the part it completes ("Why? (What did X say)"). Each part gets 2-3 queries (see _queries).
    Empty input, or input without a single letter or digit, gives no parts. Input with no content words at all
    gives one part, the question itself, with no queries: the caller names it as a gap. Fragments without content
    words ("Thanks!") are dropped when other parts have content. Questions over MAX_QUESTION_CHARS are cut at a
    sentence or word boundary (`truncated`); work is bounded by MAX_PIECES.
    """
    text = re.sub(r"[^\S\n]+", " ", (question or "").replace("\r", "\n")).strip()
    if not re.search(r"[^\W_]", text):
        return SplitResult()
    short = _truncate(text, MAX_QUESTION_CHARS)
    truncated = len(short) < len(text)
    parts: list[SubQuery] = []
    topic: list[str] = []  # unstemmed content words of the last self-contained part, for its followers' queries
    context: list[str] = []  # statements' words, for every part after them
    previous: SubQuery | None = None
    pieces = _pieces(short)
    for piece, kind in pieces:  # a statement is context for every part, before or after it
        if kind == "context":
            context += content_terms(piece)
    for piece, kind in pieces:
        if kind == "context":
            continue
        sub = _tidy(piece, True)
        terms = content_terms(strip_request(sub))
        elliptical = not terms and previous is not None
        if elliptical and previous is not None:  # "..., and why?": the part it completes gives its topic
            sub = f"{sub.rstrip(_ENDS + '.')} ({previous.question.rstrip(_ENDS + '.')})?"
            terms = content_terms(strip_request(sub))
        if not terms or any(p.question.lower() == sub.lower() for p in parts):
            continue
        leans = _leans(sub, terms)
        inherited = (topic if leans else []) + context
        part = analyse_part(sub, content_terms(" ".join(inherited), stemmed=True))
        if leans and previous is not None and previous.part is not None:  # "its price": the names "it" stands for
            part.constraints += [c for c in previous.part.constraints if c.kind == "name" and not c.soft
                                 and c not in part.constraints]
        if leans and previous is not None and previous.part is not None and _answer_subject(sub, previous.part):
            part.answer_of = previous.part
        parts.append(SubQuery(question=sub, queries=_queries(sub, inherited), part=part))
        if not elliptical:
            previous = parts[-1]  # the last part with words of its own: what an elliptical part completes
        if not leans or not topic:
            topic = terms
    if not parts:
        whole = " ".join(short.split())
        return SplitResult(parts=[SubQuery(question=whole, queries=[], part=analyse_part(whole))],
                           truncated=truncated)
    max_parts = max(1, max_parts)
    return SplitResult(parts=parts[:max_parts], dropped=[p.question for p in parts[max_parts:]], truncated=truncated)


def split_question(question: str, max_parts: int = 4) -> list[SubQuery]:
    """The sub-questions of `question` (split_question_result also says what the cap dropped)."""
    return split_question_result(question, max_parts).parts
