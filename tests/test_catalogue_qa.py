"""The search-QA benchmarks (tracerl/tasks/catalogue/qa.py) on their fixture rows: each one's
corpus for the ``search`` tool, the tool on good and bad calls, and exact match against any
reference on right, near-miss and malformed replies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracerl
from tracerl import tasks
from tracerl.tasks.bench_agents import chat_agent
from tracerl.tasks.catalogue.qa import (
    MAX_WORDS,
    TOP_K,
    NaturalQuestions,
    chunks,
    f1,
    final_answer,
    references,
    sentences,
)
from tracerl.testing import ScriptedServer

pytest.importorskip("datasets")
pytest.importorskip("bm25s")

DATA = Path(__file__).parent / "data"
NAMES = ["hotpotqa", "2wiki", "musique", "nq", "triviaqa", "squad"]



def _task(name: str, key: str, value: str, split: str = "test"):
    """The fixture row of ``name`` whose column ``key`` is ``value``."""
    found = [t for t in tasks.get(name).tasks(split, 10, path=DATA) if t.data[key] == value]
    assert found, f"{name}: no {split} row with {key}={value!r}"
    return found[0]


def _grades(name: str, task, replies: dict[str, bool]) -> None:
    spec = tasks.get(name)
    for reply, right in replies.items():
        assert spec.is_correct(task, reply) is right, (name, reply)
        assert spec.reward(task, reply) == float(right), (name, reply)


def _search(name: str, task, query):
    return tasks.get(name).call_tool(task, "search", {"query": query})


# ---------------------------------------------------------------------------- the search tool


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("arguments", [None, "capital", [], ["capital"], {}, {"q": "capital"}, {"query": None},
                                       {"query": ["capital", "city"]}, {"query": {"text": "capital"}},
                                       {"query": True}, {"query": ""}, {"query": " \n\t"}])
def test_the_search_tool_answers_bad_arguments_with_an_error(name, arguments):
    spec = tasks.get(name)
    task = spec.tasks("test", 1, path=DATA)[0]
    assert spec.call_tool(task, "search", arguments).startswith("error:")


@pytest.mark.parametrize("name", NAMES)
def test_the_search_tool_returns_at_most_three_of_the_rows_own_passages(name):
    spec = tasks.get(name)
    for task in spec.tasks("test", 10, path=DATA):
        docs = spec.source.passages(task.data)
        hits = json.loads(_search(name, task, spec.source.problem_text(task.data)))
        assert 1 <= len(hits) <= TOP_K and all(h in docs for h in hits) and len(set(hits)) == len(hits)
        assert _search(name, task, "the of and is") == "no passage matches"  # stop words only
        assert _search(name, task, "zzqxv") == "no passage matches"
        assert spec.call_tool(task, "browse", {"query": "x"}).startswith("error: unknown tool")
        assert spec.tools(task)[0]["function"]["name"] == "search" and spec.source.tool_names == ("search",)
        long = _search(name, task, "word " * 50_000 + spec.source.problem_text(task.data))
        assert long == "no passage matches" or isinstance(json.loads(long), list)


def test_a_numeric_query_is_searched_as_text():
    task = _task("musique", "id", "2hop__482757_12019")
    hits = json.loads(_search("musique", task, 1960))
    assert hits[0].startswith("Houston Baptist University:") and "Founded in 1960" in hits[0]


def test_a_row_with_no_passages_finds_nothing():
    task = _task("triviaqa", "question_id", "qz_2407")
    empty = task.model_copy(update={"data": {**task.data, "entity_pages": {
        "doc_source": [], "filename": [], "title": [], "wiki_context": []}}})
    assert _search("triviaqa", empty, "Atlantic Ocean") == "no passage matches"


# ---------------------------------------------------------------------------- each corpus


def test_2wiki_paragraphs_join_sentences_with_a_space_and_rank_the_gold_first():
    task = _task("2wiki", "_id", "8813f87c0bdd11eba7f7acde48001122")
    docs = tasks.get("2wiki").source.passages(task.data)
    assert len(docs) == 4 and '"Chaos". He is the son of actress Małgorzata Braunek' in docs[1]
    hits = json.loads(_search("2wiki", task, "Xawery Żuławski son of actress"))
    assert hits[0].startswith("Xawery Żuławski:")


def test_musique_passages_are_the_rows_paragraphs_without_the_supporting_flags():
    task = _task("musique", "id", "2hop__482757_12019")
    docs = tasks.get("musique").source.passages(task.data)
    assert len(docs) == 5 and docs[1].startswith("The Collegian (Houston Baptist University): The Collegian is")
    assert not any("is_supporting" in d or "True" in d for d in docs)


def test_nq_passages_mix_positives_and_negatives_without_saying_which_is_which():
    task = _task("nq", "query", "who sings does he love me with reba")
    docs = tasks.get("nq").source.passages(task.data)
    positive = f"Does He Love You: {task.data['positive_passages'][0]['text']}"
    assert len(docs) == 3 and positive in docs and docs[0] != positive  # the positive is not put first
    assert json.loads(_search("nq", task, "Reba McEntire duet Linda"))[0] == positive


def test_nq_asks_the_query_as_a_question_and_dedups_on_the_query():
    task = _task("nq", "query", "how many pages is invisible man by ralph ellison")
    spec = tasks.get("nq")
    assert spec.messages(task)[-1]["content"] == "how many pages is invisible man by ralph ellison?"
    assert spec.source.problem_text(task.data) == "how many pages is invisible man by ralph ellison"
    args, kwargs = NaturalQuestions.hub.load_args(None, "dev")
    assert args == ("parquet",) and kwargs["data_files"] == {
        "dev": ["hf://datasets/Tevatron/wikipedia-nq@refs/convert/parquet/default/dev/*.parquet"]}


def test_triviaqa_pages_are_cut_into_bounded_paragraphs():
    task = _task("triviaqa", "question_id", "tc_33", split="train")
    docs = tasks.get("triviaqa").source.passages(task.data)
    assert len(docs) == 3 and all(d.startswith("Andrew Lloyd Webber: ") for d in docs)  # one per paragraph
    assert json.loads(_search("triviaqa", task, "US premiere 10 December 1993"))[0].startswith(
        "Andrew Lloyd Webber: Sunset Boulevard opened")
    text = "\n\n".join([" ".join(f"w{i}" for i in range(300)), "short one", "", "  "])
    pieces = chunks(text)
    assert [len(p.split()) for p in pieces] == [MAX_WORDS, MAX_WORDS, 300 - 2 * MAX_WORDS, 2]
    assert " ".join(pieces[:3]).split() == [f"w{i}" for i in range(300)]  # nothing lost at the cuts


def test_squad_passages_are_the_sentences_of_the_rows_context():
    task = _task("squad", "id", "5733be284776f41900661182", split="train")
    docs = tasks.get("squad").source.passages(task.data)
    assert len(docs) == 7 and all(d.startswith("University of Notre Dame: ") for d in docs)
    assert "".join(d.removeprefix("University of Notre Dame: ") for d in docs).replace(" ", "") == \
        task.data["context"].replace(" ", "")
    assert "Saint Bernadette Soubirous" in json.loads(_search("squad", task, "Lourdes 1858 appeared"))[0]
    assert sentences('He won. "Yes," she said. It cost $3.50 in 1990! Why? (Nobody knows.)') == \
        ["He won.", '"Yes," she said.', "It cost $3.50 in 1990!", "Why?", "(Nobody knows.)"]


# ---------------------------------------------------------------------------- grading


def test_2wiki_grades_names_and_yes_no():
    _grades("2wiki", _task("2wiki", "_id", "8813f87c0bdd11eba7f7acde48001122"), {
        "The answer is Małgorzata Braunek.": True, "The answer is MAŁGORZATA BRAUNEK": True,
        "The answer is Xawery Żuławski.": False, "The answer is Braunek.": False})
    _grades("2wiki", _task("2wiki", "_id", "28941a1e0bdc11eba7f7acde48001122"), {
        "The answer is The Mask of Fu Manchu.": True, "The answer is mask of fu manchu": True,
        "The answer is Blind Shaft.": False, "The answer is The Mask of Fu Manchu (1932).": False})
    _grades("2wiki", _task("2wiki", "answer", "no"), {
        "The answer is No.": True, "<answer> no </answer>": True, "The answer is yes.": False,
        "The answer is no, they are not.": False})


def test_musique_accepts_the_answer_or_any_alias():
    _grades("musique", _task("musique", "id", "2hop__131818_161450", split="train"), {
        "The answer is Mike Medavoy.": True, "The answer is Medavoy.": True,
        "The answer is Orion Pictures.": False, "The answer is Mike.": False})
    _grades("musique", _task("musique", "id", "2hop__129292_160863"), {
        "The answer is Tampere.": True, "The answer is Tampere, Finland.": True, "The answer is Finland.": False})
    _grades("musique", _task("musique", "id", "2hop__482757_12019"), {
        "Founded in 1960. The answer is 1960.": True, "The answer is \\boxed{1960}": True,
        "The answer is 1961.": False, "The answer is 19600.": False})


def test_nq_accepts_any_of_its_answers_but_not_their_sum():
    _grades("nq", _task("nq", "query", "who wrote the song the twelfth of never", split="train"), {
        "The answer is Jerry Livingston.": True, "The answer is paul francis webster": True,
        "The answer is Jerry Livingston and Paul Francis Webster.": False, "The answer is Johnny Mathis.": False})
    _grades("nq", _task("nq", "query", "how many pages is invisible man by ralph ellison"), {
        "The answer is 581 (second edition).": True, "The answer is 581 second edition": True,
        "The answer is 581.": False, "The answer is 582 (second edition).": False})


def test_triviaqa_grades_against_the_raw_aliases_squad_normalised():
    _grades("triviaqa", _task("triviaqa", "question_id", "bt_1455"), {
        "The answer is a traffic warden.": True, "The answer is Meter maid.": True,
        "The answer is Traffic Warden's.": True, "The answer is traffic wardens": True,
        "The answer is a postwoman.": False, "The answer is traffic.": False})
    _grades("triviaqa", _task("triviaqa", "question_id", "qz_2407"), {
        "The answer is the Atlantic Ocean.": True, "The answer is Atlantic": True,
        "The answer is the Pacific Ocean.": False, "The answer is South Atlantic.": False})
    _grades("triviaqa", _task("triviaqa", "question_id", "sfq_1201", split="train"), {
        "The answer is 1912.": True, "The answer is 1913.": False})


def test_squad_accepts_any_annotators_answer():
    _grades("squad", _task("squad", "id", "56be4db0acb8001400a502ee"), {
        "The answer is Levi's Stadium.": True, "The answer is Levis Stadium": True,
        "The answer is Santa Clara, California.": True, "The answer is Santa Clara.": False,
        "The answer is the San Francisco Bay Area.": False})
    _grades("squad", _task("squad", "id", "56be4db0acb8001400a502ec"), {
        "The answer is the Denver Broncos.": True, "The answer is Broncos.": False,
        "The answer is Carolina Panthers.": False})


@pytest.mark.parametrize("name", NAMES)
def test_garbage_replies_score_zero_and_the_solution_uses_the_first_reference(name):
    spec = tasks.get(name)
    for task in spec.tasks("test", 10, path=DATA):
        for bad in (42, b"The answer is x", ["The answer is"], {"answer": task.answer}, "<answer></answer>",
                    "<answer> . </answer>", "The answer is the.", "\\boxed{ }", "The answer is <answer>."):
            assert spec.is_correct(task, bad) is False and spec.reward(task, bad) == 0.0, (task.id, bad)
        first = references(task.answer)[0]
        assert spec.source.solution(task) == f"The answer is {first}."


def test_solutions_lead_with_the_canonical_answer():
    assert tasks.get("triviaqa").source.solution(_task("triviaqa", "question_id", "tc_33", split="train")) == \
        "The answer is Sunset Boulevard."
    assert tasks.get("squad").source.reference(_task("squad", "id", "56be4db0acb8001400a502ec").data) == \
        ["Denver Broncos"]  # three annotators, one answer


def test_the_answer_is_read_from_the_last_tag_then_the_usual_forms():
    assert final_answer("<answer>Paris</answer> no wait <answer> Lyon </answer>") == " Lyon "
    assert final_answer("The answer is <answer>Paris</answer>.") == "Paris"
    assert final_answer("so \\boxed{Paris}") == "Paris" and final_answer("The answer is Paris.") == "Paris"
    assert final_answer("Paris") is None and final_answer(None) is None and final_answer(7) is None


def test_f1_takes_the_best_reference_and_gives_yes_no_no_partial_credit():
    assert f1("Mount Tarn peak", "Mount Tarn") == 0.8
    assert f1("the Broncos", ["Carolina Panthers", "Denver Broncos"]) == pytest.approx(2 / 3)
    assert f1("Denver Broncos", ["Carolina Panthers", "Denver Broncos"]) == 1.0
    assert f1("yes it is", "yes") == 0.0 and f1("yes", "yes") == 1.0 and f1("no", "no way") == 0.0
    assert f1(None, "Paris") == 0.0 and f1("Paris", []) == 0.0 and f1("", "") == 0.0


# ---------------------------------------------------------------------------- the default agent


def test_the_chat_agent_searches_nq_passages_and_survives_a_bad_call(tracing):
    task = _task("nq", "query", "who played the mother in the black stallion")

    def script(messages, tools):
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if not results:
            return {"content": None, "tool_calls": [{"name": "search", "arguments": {"query": ["mother"]}}]}
        if len(results) == 1:
            assert results[0].startswith("error:")
            return {"content": None, "tool_calls": [{"name": "search", "arguments": {"query": "Black Stallion mother"}}]}
        return f"The answer is {'Teri Garr' if 'Teri Garr' in results[-1] else 'unknown'}."

    settings = tracerl.RolloutSettings(gateway_url="", model="scripted", api_key="x")
    with ScriptedServer(script, tracer_provider=tracing.provider) as server:
        episode = chat_agent(task, settings.model_copy(update={"gateway_url": server.url}), tracing=tracing)
    assert episode.reward == 1.0 and episode.is_correct is True
    assert server.requests[0]["body"]["messages"][-1]["content"].endswith("black stallion?")
