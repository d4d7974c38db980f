"""What a question part asks, read as a careful reader would: focus, predicates, constraints, parts, answers."""
from __future__ import annotations

import re
from typing import Any

import pytest

from pipeline.research.extractive import analysis, answers, terms
from pipeline.research.extractive.analysis import Part, analyse_part, asked_office, did_verb, focus_of, predicates_of
from pipeline.research.extractive.answers import answer_values
from pipeline.research.extractive.questions import split_question
from pipeline.research.extractive.terms import content_terms, kin, stem
from tests.regex_audit import token_texts

ANY = "*"  # a column not checked: "What is the name/title of X?" reports wh="name", a marker rather than a wh-word


def wrong(case: Any, reason: str) -> Any:
    """A case the code gets wrong today: `reason` says what it gives; strict, so a fix shows up as XPASS."""
    return pytest.param(*case, marks=pytest.mark.xfail(reason=reason, strict=True))


def questions(text: str) -> list[str]:
    return [p.question for p in split_question(text)]


def part_of(text: str) -> Part:
    [sub] = split_question(text)
    assert sub.part is not None
    return sub.part


def constraint_map(part: Part) -> dict[tuple[str, str], bool]:
    """(kind, text) -> soft, the text lowercased and without a final full stop ("Jr." and "Jr" are one name)."""
    return {(c.kind, c.text.strip(" .").lower()): c.soft for c in part.constraints}


def value_texts(sentence: str, question: str) -> list[str]:
    return [v.text for v in answer_values(sentence, analyse_part(question))]


# --- focus: wh-word, head noun, answer type, money -----------------------------------------------------------------

FOCUS: list[Any] = [
    ("What is the combined maximum value of the contracts?", "what", "value", "number", False),  # "the combined"
    ("What was the estimated cost of the bridge?", "what", "cost", "number", True),
    ("How many human and animal cases has the outbreak caused?", "how many", "cases", "number", False),
    ("What is the official title and release date of the film?", "what", "title", "title", False),
    ("What is the US starting price of the 2020 Kia Niro EV?", "what", "price", "number", True),  # "US" modifies
    ("Which NFL team drafted Joe Burrow in 2020?", "which", "team", "organisation", False),
    ("Which PEP added the walrus operator?", "which", "pep", "number", False),  # an acronym before a verb: the head
    ("Which CEO runs Tesla?", "which", "ceo", "person", False),
    ("Which US state has the most lakes?", "which", "state", "place", False),
    ("Which US military base were the hostages flown to?", "which", "base", "place", False),
    ("What caused the crash of the jet?", "what", None, "other", False),  # a verb after "what": no head
    ("How quickly can the retractable soft top of the Lexus LC 500 Convertible close?",
     "how quickly", None, "number", False),
    ("What range of digest sizes can BLAKE2b produce, according to the hashlib docs?",
     "what", "range", "number", False),
    ("Which architecture firm won the 2019 Pritzker Prize, the profession's highest honour?",
     "which", "firm", "organisation", False),
    ("How old is Julian Assange, the WikiLeaks founder arrested in London in April 2019?",
     "how old", None, "number", False),
    ("When did SpaceX first land an orbital rocket booster back on its launch pad at Cape Canaveral?",
     "when", None, "date", False),
    ("Who directed the 2019 South Korean film Parasite, which won the Palme d'Or at Cannes?",
     "who", None, "name", False),
    ("In which stadium will the 2022 FIFA World Cup final be played in Qatar?", "which", "stadium", "place", False),
    # A verb in the present after the head noun is no part of it.
    ("Which company makes the 1Password password manager?", "which", "company", "organisation", False),
    ("What hospital employs Owen Dempsey?", "what", "hospital", "place", False),
    ("Which sports cars sold best in 2019?", "which", "cars", "other", False),
    ("Which Fargo and Legion creator was in talks to direct Star Trek 4?", "which", "creator", "person", False),
    ("Which Hong Kong police commander said the protesters had no option?", "which", "commander", "person", False),
    ("What is the title of the novel that shared the 2019 Booker Prize with The Testaments?",
     ANY, "novel", "title", False),
    ("What is the title of the memoir Michelle Obama published in November 2018?",
     ANY, "memoir", "title", False),
    ("How much did Google pay for Fitbit, the wearable fitness tracker maker, in November 2019?",
     "how much", None, "number", True),
    ("What caused the blackout that left 38 million people in Argentina and Uruguay without power in June 2019?",
     "what", None, "other", False),
    ("How many people were arrested during the Hong Kong protests on July 1, 2019?",
     "how many", "people", "number", False),
    ("Which Japanese company bought the British chip designer Arm in 2016?", "which", "company", "organisation", False),
    ("Which city will host the 2028 Summer Olympics after Paris?", "which", "city", "place", False),
    ("Where was Boris Johnson, the British prime minister who led the Brexit campaign, born?",
     "where", None, "place", False),
    ("Which player scored the winning goal in the 2014 World Cup final between Germany and Argentina?",
     "which", "player", "person", False),
    ("What year did the Berlin Wall fall, ending the division of the city into East and West?",
     "what", "year", "date", False),
    ("How much does the Apple Mac Pro cost in its base configuration?", "how much", None, "number", True),
    ("How much did it cost to build the Burj Khalifa, which opened in Dubai in January 2010?",
     "how much", None, "number", True),
    ("How much rain fell on Houston during Hurricane Harvey in August 2017?",
     "how much", "rain", "number", False),
    ("What percentage of the vote did Emmanuel Macron win in the 2017 French presidential run-off?",
     "what", "percentage", "number", False),
    ("What is the price of a first-class stamp in the UK after the March 2020 increase?",
     "what", "price", "number", True),
    ("What salary does the Governor of the Bank of England, Andrew Bailey, earn?", "what", "salary", "number", True),
    ("Who was the CEO of Boeing when the 737 MAX was grounded in March 2019?", "who", None, "name", False),
    ("Who is the current president of the European Central Bank, the successor of Mario Draghi?",
     "who", None, "name", False),
    ("Tell me who won the 2019 Nobel Peace Prize.", "who", None, "name", False),
    ("What did Boeing call the flight-control software blamed for the two 737 MAX crashes?",
     "what", None, "title", False),
    ("What is Airbus's new long-range jet for the Pacific routes called?", "what", "jet", "title", False),
    ("What is SpaceX's next heavy rocket dubbed?", "what", "rocket", "title", False),
    # Not a named owner's thing (a file's name is often lower case), or "called" as in "declared".
    ("What is the config file called?", "what", "file", "other", False),
    ("Which penalty was called?", "which", "penalty", "other", False),
    ("What is Acme's new process called in French?", "what", "process", "other", False),
    ("What is the name of the company that makes the Roomba robot vacuum cleaner?",
     ANY, "company", "organisation", False),
    ("What is the name of the interior minister who announced the plan?", ANY, "minister", "person", False),
    ("How many of the customers who signed up for the free trial converted?", "how many", "customers", "number",
     False),
    ("How long did the 2018-2019 United States federal government shutdown last?", "how long", None, "number", False),
    ("How many years did Nelson Mandela spend in prison before his release in February 1990?",
     "how many", "years", "number", False),
    ("On what date did the United Kingdom formally leave the European Union?", "what", "date", "date", False),
    ("What time did the Notre-Dame de Paris fire start on April 15, 2019?", "what", "time", "date", False),
    ("Which airline ordered 30 Boeing 787-9 Dreamliners at the 2019 Dubai Air Show?",
     "which", "airline", "organisation", False),
    ("Which country did Kevin King and Timothy Weeks, the two professors held by the Taliban, teach in?",
     "which", "country", "place", False),
    ("What is the capital of Kazakhstan, which renamed it Nur-Sultan in March 2019?",
     "what", "capital", "place", False),
    ("Which singer won the Eurovision Song Contest in 2019 for the Netherlands?", "which", "singer", "person", False),
    ("Which Democratic candidate dropped out of the presidential race on December 3, 2019?",
     "which", "candidate", "person", False),
    ("Which company's shares fell the most on the FTSE 100 on Monday?",
     "which", "company", "organisation", False),
    ("How much money did the Ice Bucket Challenge raise for the ALS Association in 2014?",
     "how much", "money", "number", True),
    ("How many goals did Lionel Messi score for Barcelona in the 2011-12 season?",
     "how many", "goals", "number", False),
    ("How tall is the Burj Khalifa in Dubai, the world's tallest building?", "how tall", None, "number", False),
    ("On which night of the 17-night campaign did the telescope see the plume?", "which", "night", "date", False),
    # After "what is", a possessor is not the head: the thing possessed is what is asked.
    ("What were Acme Foods's total sales for the quarter?", "what", "sales", "number", False),
    ("What is the company's valuation?", "what", "valuation", "number", True),
    ("What was Tesla's net profit in 2019?", "what", "profit", "number", True),
    ("Which company's shares fell?", "which", "company", "organisation", False),  # which company: the possessor
    ("What is Mobileye?", "what", None, "other", False),
    ("Which weekend did the band choose for its reunion show?", "which", "weekend", "date", False),
    ("Why did Tesla recall 135,000 Model S and Model X vehicles in February 2021?", "why", None, "other", False),
    ("How did the fire that destroyed the roof of Notre-Dame de Paris in April 2019 start?",
     "how", None, "other", False),
    ("What sentence did Patrick W. Carlineo Jr., the Addison man who pleaded guilty to threatening to kill Ilhan Omar, "
     "receive?", "what", "sentence", "other", False),
]


@pytest.mark.parametrize(("question", "wh", "head", "answer_type", "money"), FOCUS)
def test_the_focus_is_what_a_reader_would_say_is_asked(question: str, wh: str, head: str | None, answer_type: str,
                                                       money: bool) -> None:
    focus = focus_of(question)
    got = (focus.wh if wh != ANY else ANY, focus.head, focus.answer_type, focus.money)
    assert got == (wh, head, answer_type, money)
    assert analyse_part(question).focus == focus


@pytest.mark.parametrize(("question", "slot"), [
    ("How much did President Ann Reyes weigh at her 2019 physical?", ["weigh"]),  # told by "171 pounds"
    ("How much did Acme Corp pay for the stake?", ["pay"]),
    ("How much did Michael McDonald really earn in 1975?", ["earn"]),  # past an adverb
    ("How much did Dana Reyes first weigh at birth?", ["weigh"]),  # past a listed adverb
    ("How much did he pay?", []),  # a pronoun subject: the verb is all the part asks about
    ("How much did Acme's unit pay for it?", []),  # the subject goes on past the name
    ("How much does NASA administrator Jim Bridenstine say it costs?", []),  # a title in the subject, or a verb?
])
def test_how_much_a_named_subject_did_names_the_measure_as_the_answer_s_word(question: str, slot: list[str]) -> None:
    assert focus_of(question).slot == slot


# --- predicates: the verb the answer must be said with -------------------------------------------------------------

PREDICATES: list[Any] = [  # Snowball stems: "acquired" -> "acquir", "replace" -> "replac"
    ("Which architecture firm won the 2019 Pritzker Prize, the profession's highest honour?", ["win"]),
    ("Who founded Tesla, the electric carmaker now run by Elon Musk?", ["found"]),
    ("How many people were arrested during the Hong Kong protests on July 1, 2019?", ["arrest"]),
    ("Which engine maker will power the Boeing 777X, the largest twin-engine jet?", ["power"]),
    ("Which Japanese company bought the British chip designer Arm in 2016?", ["buy"]),
    ("Which team signed Antoine Griezmann from Atletico Madrid in July 2019?", ["sign"]),
    ("Who acquired WhatsApp for $19 billion in 2014?", ["acquir"]),
    ("Who was arrested at the Ecuadorian embassy in London in April 2019?", ["arrest"]),
    ("Who will replace Theresa May as leader of the Conservative Party?", ["replac"]),
    ("Which Democratic candidate dropped out of the presidential race on December 3, 2019?", ["drop"]),
    ("How many people signed up for Disney+ on its first day in November 2019?", ["sign"]),
    ("Which airline ordered 30 Boeing 787-9 Dreamliners at the 2019 Dubai Air Show?", ["order"]),
    ("Which company's shares fell the most on the FTSE 100 on Monday?", ["fall"]),
    ("Who directed the 2019 South Korean film Parasite, which won the Palme d'Or at Cannes?", ["direct"]),
    ("Tell me who won the 2019 Nobel Peace Prize.", ["win"]),
    ("Whose novel shared the 2019 Booker Prize with The Testaments by Margaret Atwood?", ["share"]),
    ("What did Donald Trump say about the Ukraine call at his September 2019 press conference?", []),
    ("Which organization employs Bradley M. Kuhn?", ["employ"]),
    ("Which Emscripten setting makes it emit a standalone file?", ["make"]),
    ("How many goals does Messi have?", []),
    ("Who is the CEO of Boeing?", []),
    ("How old is Julian Assange?", []),
    ("How many new vehicles had consumers bought by the end of 2020?", []),
    ("What company did Elon Musk buy in October 2022?", []),
    ("How many jobs did the Amazon HQ2 deal promise to bring to Queens?", []),
    ("How many employees has Google laid off since January 2023?", []),
    ("Who did Boris Johnson appoint as Chancellor of the Exchequer in February 2020?", []),
    ("What sentence did Patrick W. Carlineo Jr., the Addison man who pleaded guilty to threatening to kill Ilhan Omar, "
     "receive?", []),
]


@pytest.mark.parametrize(("question", "predicates"), PREDICATES)
def test_the_predicate_is_the_verb_said_of_the_answer(question: str, predicates: list[str]) -> None:
    assert analyse_part(question).predicates == predicates


def test_predicates_of_reads_a_core_without_its_descriptions() -> None:
    assert predicates_of("Which engine maker will power the Boeing 777X?") == ["power"]
    assert predicates_of("What did Donald Trump say?") == []


@pytest.mark.parametrize(("question", "verb"), [
    ("When did Coty close its deal for 51% of Kylie Cosmetics?", "close"),
    ("When did Hong Kong police lift the Polytechnic University cordon?", "lift"),  # "police" is the subject's
    ("When did the deal close?", "close"),
    ("What sentence did Patrick Carlineo get for threatening to kill Ilhan Omar?", "get"),
    ("How many vehicles did Houston dealers sell in October?", "sell"),
    ("When did Michael McDonald first join the band?", "join"),
    ("How many people did PG&E originally estimate could be affected?", "estim"),  # not "affected", after "could"
    ("How many points did LeBron James score against the Nets?", "score"),
    ("When did the US-China phase one trade deal get signed?", None),  # where the subject ends is unclear
    ("When did the law take effect?", None),
    ("What did the company say about job cuts?", "say"),
    ("Who won the 2022 Citrus Bowl?", None),
    ("When will the deal close?", None),
])
def test_the_verb_after_did_and_its_subject(question: str, verb: str | None) -> None:
    assert did_verb(question) == verb


# --- constraints: names, years, dates, numbers, quoted titles; soft in descriptions --------------------------------

CARLINEO = ("What sentence did Patrick W. Carlineo Jr., the Addison, New York man who pleaded guilty to threatening "
            "to kill Ilhan Omar, receive?")
SONDLAND = "What did Gordon Sondland tell Donald Trump about Ukraine in July 2019"
SONDLAND_NAMES = [("name", "Gordon Sondland", False), ("name", "Donald Trump", False), ("name", "Ukraine", False),
                  ("year", "2019", False), ("name", "David Holmes", True)]

CONSTRAINTS: list[Any] = [
    wrong((CARLINEO, [("name", "Patrick W. Carlineo Jr.", False), ("name", "Addison", True),
                      ("name", "New York", True), ("name", "Ilhan Omar", True)], ()),
          "'New York' is hard: the appositive is cut at the comma after 'Addison'"),
    ("What sentence did Patrick W. Carlineo Jr., the Addison man who pleaded guilty to threatening to kill Ilhan Omar, "
     "receive?", [("name", "Patrick W. Carlineo Jr.", False), ("name", "Addison", True), ("name", "Ilhan Omar", True)],
     ()),
    (f"{SONDLAND}, according to official David Holmes?", SONDLAND_NAMES, ("July",)),
    (f"According to official David Holmes, {SONDLAND[0].lower()}{SONDLAND[1:]}?", SONDLAND_NAMES, ("July",)),
    ("How many flu cases had Ohio's EEE outbreak caused by May?",  # a possessive ends a name: two names
     [("name", "Ohio's", False), ("name", "EEE", False)], ("Ohio's EEE",)),
    ("How many districts closed for the Red for Ed rally run by Americans for Prosperity?",  # "for" inside a name
     [("name", "Red for Ed", False), ("name", "Americans for Prosperity", False)], ()),
    ("Who voted for Biden in Ohio?", [("name", "Biden", False), ("name", "Ohio", False)], ()),
    # After a verb, "for" parts its object from what it is for.
    ("Which candidate won Iowa for Republicans in 2024?", [("name", "Iowa", False), ("name", "Republicans", False)],
     ()),
    ("Did Tesla swap LG for Panasonic?", [("name", "LG", False), ("name", "Panasonic", False)], ()),
    ("Who led the 2019 Red for Ed rally?", [("name", "Red for Ed", False)], ()),  # after a figure: one name
    ("Who founded the People's Republic of China, and who runs McDonald's Corporation?",  # one name each
     [("name", "People's Republic of China", False), ("name", "McDonald's Corporation", False)], ()),
    ("How many Boeing 787-9 Dreamliners did Emirates order at the Dubai Air Show in November 2019?",
     [("name", "Boeing 787-9 Dreamliners", False), ("name", "Emirates", False), ("name", "Dubai Air Show", False),
      ("year", "2019", False)], ("November",)),
    ("Which American company bought the Israeli self-driving car firm Mobileye in March 2017?",
     [("name", "American", True), ("name", "Israeli", True), ("name", "Mobileye", False), ("year", "2017", False)],
     ("March",)),
    ('Who sang "Bohemian Rhapsody" with Queen at the Live Aid concert at Wembley Stadium in July 1985?',
     [("quoted", "Bohemian Rhapsody", False), ("name", "Queen", False), ("name", "Live Aid", False),
      ("name", "Wembley Stadium", False), ("year", "1985", False)], ("July",)),
    ("What did the Federal Reserve announce about interest rates on March 15, 2020?",
     [("date", "March 15", False), ("year", "2020", False), ("name", "Federal Reserve", False)], ("March",)),
    ("How many people died when Hurricane Maria hit Puerto Rico in 2017, according to a George Washington University "
     "study?", [("name", "Hurricane Maria", False), ("name", "Puerto Rico", False), ("year", "2017", False),
                ("name", "George Washington University", True)], ()),
    ("What did Apple pay for the 2,500 patents it bought from Nortel in 2011?",
     [("number", "2,500", False), ("name", "Apple", False), ("name", "Nortel", False), ("year", "2011", False)], ()),
    ("What job did Kim Darroch, who resigned as British ambassador to Washington in July 2019, hold before that?",
     [("name", "Kim Darroch", False), ("name", "British", True), ("name", "Washington", True), ("year", "2019", True)],
     ("July",)),
    ("Which country released Kevin King and Timothy Weeks, the two professors held by the Taliban for three years?",
     [("name", "Kevin King", False), ("name", "Timothy Weeks", False), ("name", "Taliban", True)], ()),
    ("How many American troops are stationed in Germany?", [("name", "American", True), ("name", "Germany", False)],
     ()),
    ('How much did Ann Holt weigh at her March 2019 physical, her last full exam before the trip to Mercy Hospital '
     'that her office described as "routine"?',
     [("name", "Ann Holt", False), ("year", "2019", False), ("name", "Mercy Hospital", True),
      ("quoted", "routine", True)], ("March",)),  # ", her last full exam ...": an appositive opened by a possessive
    ("When does Acme plan to ship its Nova phone, following the Orion phone it launched in May 2019?",
     [("name", "Acme", False), ("name", "Nova", False), ("name", "Orion", True), ("year", "2019", True)],
     ("May",)),  # ", following ...": what came before the event asked about, not a year its answer must say
    ("How many fans attended the final, after the semifinal in Lyon in 2018?",
     [("name", "Lyon", True), ("year", "2018", True)], ()),
    # A closing "after <Name> <verb>ed ..." places the asked event in time; its name and year are not what is asked.
    ("Who did the Free Software Foundation name as its new president after Richard M. Stallman resigned in "
     "September 2019?", [("name", "Free Software Foundation", False), ("name", "Richard M. Stallman", True),
                         ("year", "2019", True)], ("September",)),
    ("Which firm won the Navy contract before Lockheed Martin protested in 2021?",
     [("name", "Navy", False), ("name", "Lockheed Martin", True), ("year", "2021", True)], ()),
    # ... but not when it is all the question asks, nor when its subject is not a name.
    ("What happened after Boeing announced the deal in 2019?", [("name", "Boeing", False), ("year", "2019", False)],
     ()),
    ("Which firm won the Navy contract after the Pentagon reviewed bids in 2021?",
     [("name", "Navy", False), ("name", "Pentagon", False), ("year", "2021", False)], ()),
]


@pytest.mark.parametrize(("question", "expected", "not_names"), CONSTRAINTS)
def test_constraints_are_the_names_and_numbers_and_those_in_descriptions_are_soft(
        question: str, expected: list[tuple[str, str, bool]], not_names: tuple[str, ...]) -> None:
    got = constraint_map(analyse_part(question))
    want = {(kind, text.strip(" .").lower()): soft for kind, text, soft in expected}
    assert {key: got.get(key) for key in want} == want
    names = [text for kind, text in got if kind == "name"]
    assert [n for n in names if any(word.lower() in n for word in not_names)] == []


@pytest.mark.parametrize(("question", "asked", "described"), [
    ("How old is WikiLeaks co-founder Julian Assange?", ["old"], ["co", "founder"]),
    ("How much did the league fine quarterback Mason Rudolph?", ["leagu", "fine"], ["quarterback"]),
    ("Who is the chief executive of Acme?", ["chief", "execut"], []),  # a title asked for, not one before a name
    ("Which prize did the architect win?", ["prize", "architect", "win"], []),
])
def test_a_title_right_before_a_name_describes_and_is_not_asked(question: str, asked: list[str],
                                                                 described: list[str]) -> None:
    part = analyse_part(question)
    names = {t for c in part.constraints for t in c.terms}
    assert ([t for t in part.terms if t not in names], part.described) == (asked, described)


# --- parts: how a question is cut --------------------------------------------------------------------------------

LONG_CARLINEO = ("What sentence did Patrick W. Carlineo Jr., the 55-year-old Addison, New York man who pleaded "
                 "guilty in November 2019 to threatening to assault and murder Ilhan Omar, the Minnesota "
                 "congresswoman, in a March 2019 phone call to her Washington office, receive in February 2020?")
LONG_ARDERN = ("When did Jacinda Ardern, the New Zealand prime minister who became the youngest female head of "
               "government in the world when she took office in October 2017 at the age of 37, announce that she "
               "would resign, a decision she revealed at a Labour Party retreat in Napier in January 2023?")

PARTS: list[Any] = [
    ("What range did Orbex's engineers reach for the XR. NOVA rocket shown at the 2021 Paris Air Show, and what does "
     "it cost?", ["What range did Orbex's engineers reach for the XR. NOVA rocket shown at the 2021 Paris Air Show?",
                  "What does it cost?"]),  # an acronym's stop inside a question is no sentence end
    ("Who runs NASA. What is its budget?", ["Who runs NASA.", "What is its budget?"]),
    ("Which officer said the protesters were rioters and criminals who had no option but to surrender?",
     ["Which officer said the protesters were rioters and criminals who had no option but to surrender?"]),
    ("Which summit was held in France and Italy which hosted the talks?",
     ["Which summit was held in France and Italy which hosted the talks?"]),
    ("What share of Titan is covered by plains, and roughly how many tons of water vapor rise above Europa?",
     ["What share of Titan is covered by plains?", "Roughly how many tons of water vapor rise above Europa?"]),
    ("Which firm designed the new Tottenham Hotspur Stadium, and which company built it?",
     ["Which firm designed the new Tottenham Hotspur Stadium?", "Which company built it?"]),
    ("Who founded SpaceX, and how much did NASA pay the company for its first crewed flight in 2020?",
     ["Who founded SpaceX?", "How much did NASA pay the company for its first crewed flight in 2020?"]),
    ("What did Boris Johnson, who became prime minister in July 2019, promise about Brexit, and when did the UK leave "
     "the EU?", ["What did Boris Johnson, who became prime minister in July 2019, promise about Brexit?",
                 "When did the UK leave the EU?"]),
    ("How many people were killed in the 2019 Christchurch mosque shootings, and what sentence did the gunman, "
     "Brenton Tarrant, receive in August 2020?",
     ["How many people were killed in the 2019 Christchurch mosque shootings?",
      "What sentence did the gunman, Brenton Tarrant, receive in August 2020?"]),
    ("Which architecture firm won the 2019 Pritzker Prize, according to the Hyatt Foundation, and what is its "
     "best-known building?", ["Which architecture firm won the 2019 Pritzker Prize, according to the Hyatt Foundation?",
                              "What is its best-known building?"]),
    ("Who won the 2019 Rugby World Cup final in Yokohama, which was played on November 2, 2019 between England and "
     "South Africa, and who captained the winning side?",
     ["Who won the 2019 Rugby World Cup final in Yokohama, which was played on November 2, 2019 between England and "
      "South Africa?", "Who captained the winning side?"]),
    ("When and where was Nelson Mandela, South Africa's first black president, born?",
     ["When was Nelson Mandela, South Africa's first black president, born?",
      "Where was Nelson Mandela, South Africa's first black president, born?"]),
    ("When, and where, was Nelson Mandela born?", ["When was Nelson Mandela born?", "Where was Nelson Mandela born?"]),
    ("On what date, and where, was the 'phase one' US-China trade deal signed by Donald Trump and Liu He?",
     ["On what date was the 'phase one' US-China trade deal signed by Donald Trump and Liu He?",
      "Where was the 'phase one' US-China trade deal signed by Donald Trump and Liu He?"]),
    ("In what year, and in which city, did the first Davis Cup Finals take place?",
     ["In what year did the first Davis Cup Finals take place?",
      "In which city did the first Davis Cup Finals take place?"]),
    (CARLINEO, [CARLINEO]),
    (LONG_CARLINEO, [LONG_CARLINEO]),
    (LONG_ARDERN, [LONG_ARDERN]),
    ("How old was Greta Thunberg, when she addressed the UN Climate Action Summit in New York in September 2019?",
     ["How old was Greta Thunberg, when she addressed the UN Climate Action Summit in New York in September 2019?"]),
]


@pytest.mark.parametrize(("question", "parts"), PARTS)
def test_a_question_is_cut_only_where_another_question_starts(question: str, parts: list[str]) -> None:
    assert questions(question) == parts


def test_the_long_questions_are_long() -> None:
    assert len(LONG_CARLINEO.split()) >= 40 and len(LONG_ARDERN.split()) >= 40


def test_a_leading_according_to_is_not_a_part_and_its_source_is_kept() -> None:
    [sub] = split_question("According to official David Holmes, what did Gordon Sondland tell Donald Trump about "
                           "Ukraine in a July 2019 phone call?")
    assert not sub.question.lower().startswith("according")
    assert "Gordon Sondland" in sub.question
    assert sub.part is not None
    assert set(content_terms("David Holmes", stemmed=True)) <= set(sub.part.context_terms + sub.part.terms
                                                                   + sub.part.described)


def test_a_statement_before_the_question_is_context_not_a_part() -> None:
    part = part_of("I read that Emirates ordered 30 Boeing 787-9 jets at the Dubai Air Show in November 2019. "
                   "How much was the order worth?")
    assert part.text == "How much was the order worth?"
    assert set(content_terms("Emirates Dubai", stemmed=True)) <= set(part.context_terms)
    assert (part.focus.answer_type, part.focus.money) == ("number", True)


def test_a_second_part_leaning_on_it_takes_the_first_parts_topic() -> None:
    first, second = split_question("Which Japanese company bought Arm, the Cambridge chip designer, in 2016, and how "
                                   "much did it pay?")
    assert first.question == "Which Japanese company bought Arm, the Cambridge chip designer, in 2016?"
    assert second.question == "How much did it pay?"
    assert second.part is not None and second.part.focus.money
    assert "arm" in second.part.context_terms
    assert ("name", "arm") in constraint_map(second.part)


# --- answer values: what a sentence offers that the question does not already say ---------------------------------

ANSWERS: list[Any] = [
    ("Who founded SpaceX in 2002?", "SpaceX was founded in 2002 by Elon Musk, who had just sold PayPal to eBay.",
     ["Elon Musk"], ["SpaceX"]),
    ("Who did Boris Johnson appoint as Chancellor of the Exchequer in February 2020, after Sajid Javid resigned?",
     "Boris Johnson named Rishi Sunak as Chancellor of the Exchequer after Sajid Javid quit on Thursday.",
     ["Rishi Sunak"], ["Boris Johnson", "Sajid Javid", "Chancellor", "Exchequer", "Thursday"]),
    ("Which player scored the winning goal in the 2014 World Cup final?",
     "Mario Götze scored the winner for Germany in extra time at the Maracanã.", ["Mario Götze"], []),
    ("How many Boeing 787-9 Dreamliners did Emirates order at the Dubai Air Show?",
     "Emirates ordered 30 Boeing 787-9 Dreamliners at the Dubai Air Show on Wednesday, a deal worth $8.8 billion.",
     ["30"], ["787", "9", "8.8e9"]),
    ("How many people were arrested during the Hong Kong protests on July 1, 2019?",
     "Police said 12 people were arrested after protesters stormed the Legislative Council building on July 1.",
     ["12"], ["1", "July 1"]),
    ("When did the United Kingdom leave the European Union?",
     "The United Kingdom left the European Union at 11pm GMT on January 31, 2020, after 47 years of membership.",
     ["January 31", "2020"], ["47", "United Kingdom", "European Union"]),
    ("When did SpaceX first land an orbital rocket booster at Cape Canaveral?",
     "On December 21, 2015, a Falcon 9 first stage touched down at Landing Zone 1 at Cape Canaveral.",
     ["December 21", "2015"], ["9", "1"]),
    ("Which senator called the deficit 'the issue of our era' in 2013?",
     "In 2013, Senator Ann Reyes of Ohio called the deficit “the issue of our era.”", ["Senator Ann Reyes"],
     ["Senator Ann Reyes of Ohio"]),  # a person of a run joined by "of" is a person
    ("How much did Google pay for Fitbit?", "Google agreed to pay $2.1 billion for Fitbit, which employs 1,500 people.",
     ["2.1e9"], ["1500", "1,500"]),  # $2.1 billion, normalised
    wrong(("How much did Google pay for Fitbit?",
     "Google will pay $2.1 billion for Fitbit, which has sold more than 100 million devices.",
     ["2.1e9"], ["100e6"]), "['100e6', '2.1e9']: a count in millions passes as a sum of money"),
]


@pytest.mark.parametrize(("question", "sentence", "found", "not_found"), ANSWERS)
def test_a_sentence_offers_the_answer_and_not_what_the_question_says(question: str, sentence: str, found: list[str],
                                                                     not_found: list[str]) -> None:
    got = value_texts(sentence, question)
    assert [t for t in found if t not in got] == []
    assert [t for t in not_found if t in got] == []


def test_a_how_many_answer_is_the_one_figure_and_a_when_answer_only_dates() -> None:
    assert value_texts("Emirates ordered 30 Boeing 787-9 Dreamliners at the Dubai Air Show on Wednesday.",
                       "How many Boeing 787-9 Dreamliners did Emirates order at the Dubai Air Show?") == ["30"]
    assert sorted(value_texts("The United Kingdom left the European Union at 11pm GMT on January 31, 2020.",
                              "When did the United Kingdom leave the European Union?")) == ["2020", "January 31"]


def test_a_how_old_answer_is_the_age() -> None:
    [value] = answer_values("Assange, 47, was carried out of the Ecuadorian embassy in London by police on Thursday.",
                            analyse_part("How old is Julian Assange?"))
    assert "47" in value.key and "london" not in value.key


def test_an_untyped_part_offers_no_values() -> None:
    assert value_texts("A fault in the Yacyretá transmission system caused the blackout, officials said.",
                       "Why did Argentina and Uruguay lose power in June 2019?") == []


# --- the linear forms of former patterns give what they gave (tests/test_regex_linear.py audits the time) ----------

NAME_TOKENS = [" ", "  ", "\n", ",", "?", ";", "Bo", "x", "1", "2.5", "-", ".", "'", "_", "é", "of", "the", "and", "&",
               "who", "is", "according", "to", "per", "name", "title", "a", "an", "Jr", "II", "Mc", "D", "5"]


def test_names_descriptions_and_requests_are_read_as_the_former_patterns_read_them() -> None:
    # Each former pattern took time quadratic in a space run or in a number (exponential for the person pattern).
    # (The name pattern has since learnt names that start in lower case, "iOS": the reference below has too.)
    name_of = re.compile(r"\b(?:name|title)\s+of\s+(?:the|a|an|its|his|her|their)?\s*(?P<head>[a-z]+)", re.I)
    name = re.compile(r"(?:(?:(?<![\w'’.-])[a-z]+(?=[A-Z]))?[A-Z][\w'’.-]*|\d[\w.-]*[A-Za-z][\w.-]*)"
                      r"(?:\s+(?:of|de|la|von|van|del|der|du|the|and|&)"
                      r"(?=\s+[A-Z])|\s+(?:[A-Z][\w'’.-]*|\d[\w.-]*))*")
    description = re.compile(
        r",\s+(?:the|a|an|who|whom|whose|which|that|known|best|widely|now|then|formerly|once)\b[^,?;]*(?=,|\?|$)"
        r"|,?\s*\b(?:according\s+to|as\s+reported\s+by|reported\s+by|cited\s+by)\b[^,?;]*|,\s*per\s+(?:the\s+)?[A-Z]"
        r"[^,?;]*|(?<=[A-Za-z])\s+(?:who|whose|which|that)\s+(?!(?:is|was|are|were|did|does|do)\b)[^,?;]*(?=,)", re.I)
    person = re.compile(r"(?:(?:Mc|Mac|O'|O’)?[A-ZÀ-ÖØ-Þ][a-zß-öø-ÿ'’-]+|[A-Z]\.|[A-Z]{2,})(?:\s+(?:(?:Mc|Mac|O'|O’)?"
                        r"[A-ZÀ-ÖØ-Þ][a-zß-öø-ÿ'’-]+|[A-Z]\.|[A-Z]{2,}|de|van|von|der|da|di|la|le|Jr\.?|Sr\.?|II|III))*"
                        r"(?:'s|’s)?")
    capitalised = re.compile(r"[A-Z][\w'’.&-]*(?:\s+(?:(?:of|de|la|von|van|del|der|du|and|&)\s+)?[A-Z0-9][\w'’.&-]*)*")
    for text in token_texts(NAME_TOKENS, count=4000):
        old, new = name_of.search(text), analysis._NAME_OF.search(text)
        assert (old and (old.span(), old.groupdict())) == (new and (new.span(), new.groupdict())), text
        assert [m.span() for m in name.finditer(text)] == [
            m.span() for m in analysis._NAME.finditer(text) if m.group("number") is None], text
        assert [m.span() for m in description.finditer(text)] == [
            m.span() for m in analysis._DESCRIPTION.finditer(text)], text
        assert re.split(r"\s+(?:and|&)\s+", text) == re.split(r"(?<!\s)\s++(?:and|&)\s++", text), text
        assert bool(person.fullmatch(text)) == bool(answers._PERSON.fullmatch(text)), text
        assert [m.span() for m in capitalised.finditer(text)] == [m.span() for m in answers._NAME.finditer(text)]


def test_requests_and_tokens_are_read_as_the_former_patterns_read_them() -> None:
    request = re.compile(
        r"^\s*(?:(?:please|kindly)\s*,?\s+)?(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
        r"(?:tell\s+me|show\s+me|give\s+me|let\s+me\s+know|explain(?:\s+to\s+me)?|describe|find(?:\s+out)?|list|"
        r"summari[sz]e|look\s+up|search(?:\s+for)?|research|i\s+(?:want|would\s+like|need)\s+to\s+know|"
        r"do\s+you\s+know|i\s+wonder)\b[\s,:]*", re.I)
    letters = rf"(?:[^\W_]|[{terms._MARKS}])+"
    token = re.compile(rf"\d+(?:[.,]\d+)*(?![^\W_])|(?:[^\W\d_]\.){{2,}}|{letters}(?:['\u2019]{letters})*")
    tokens = [" ", "  ", ",", ":", "\n", "please", "Kindly", "can", "you", "tell", "me", "find", "out", "outside", "i",
              "want", "to", "know", "1", "2.5", ".", "'", "’", "a", "\u0301", "\u0966", "क"]
    for text in token_texts(tokens, count=4000):
        assert terms.strip_request(text) == request.sub("", text, count=1), text
        assert terms._TOKEN.findall(text) == token.findall(text), text


def test_a_pronoun_after_a_name_of_its_own_part_does_not_lean_on_the_part_before() -> None:
    first, second = split_question("How much revenue had the steel tariffs raised by June, and how much in farm "
                                   "purchases did Trump say he asked for?")
    assert second.part is not None and "tariff" not in second.part.context_terms  # "he" is the part's own Trump
    third, fourth = split_question("Which company built the Harbor Bridge, and how much did it cost?")
    assert fourth.part is not None and "bridg" in fourth.part.context_terms  # "it" is the bridge


def test_a_name_starting_in_lower_case_is_one_name() -> None:
    part = part_of("How many companies out of ten are writing custom iOS apps for the iPhone?")
    assert {("name", "ios"), ("name", "iphone")} <= set(constraint_map(part))


@pytest.mark.parametrize(("question", "office"), [
    ("Who was Norland's interim president during the clashes?", ["presid"]),
    ("Who is the CEO of Acme?", ["ceo", "chief", "execut"]),
    ("Who is the chief executive of Acme?", ["ceo", "chief", "execut"]),
    ("Who was the man arrested for the shooting?", []),  # a person word, no office
    ("Who is the author of the memoir?", []),
    ("Who is suing the governor of Texas?", []),  # the office is not what is asked
    ("Which governor signed the bill?", []),
])
def test_the_office_a_who_is_question_asks_about(question: str, office: list[str]) -> None:
    assert asked_office(question) == office


def test_a_family_holds_one_sense_and_its_stems() -> None:
    from collections import Counter

    from pipeline.research.extractive.terms import FAMILIES
    assert {stem("victory"), stem("defeated"), stem("won")} <= kin(stem("win"))
    assert max(Counter(w for family in FAMILIES for w in family).values()) == 1  # no word in two groups
    assert not kin(stem("department")) and not kin(stem("stepped"))  # no stem that collides with another sense
    assert stem("named") in kin(stem("appointed")) and stem("hosts") in kin(stem("held"))
    # "found" is "find" as a stem: "founded" (a firm) and "found" (a fossil) stay apart.
    assert stem("founded") not in kin(stem("found")) and stem("discovered") in kin(stem("found"))
    assert kin("zzz") == frozenset()
