"""Solver and judge: two agents, two trajectories. A LangGraph graph whose "solver" node answers
the question and whose "judge" node (the same policy through the gateway, another prompt) says
whether that answer is right. The solver is rewarded on correctness, the judge on judging
correctly (``tracerl.emit_reward(..., agent="judge")``); each trajectory is named after its
node.

    python examples/solver_judge.py --tasks 8
"""

from __future__ import annotations

import re
from typing import TypedDict

from common import ARITHMETIC, run
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph

import tracerl

tracerl.instrument("langgraph")  # the one tracerl line

JUDGE_PROMPT = "Question: {question}\nProposed answer: {answer}\nIs the proposed answer correct? Reply yes or no."


class State(TypedDict, total=False):
    question: list[dict]  # the task's chat prompt
    answer: str
    verdict: str


def build(llm: ChatOpenAI):
    def solver(state: State) -> dict:
        return {"answer": llm.invoke(state["question"]).content}

    def judge(state: State) -> dict:
        prompt = JUDGE_PROMPT.format(question=state["question"][-1]["content"], answer=state["answer"])
        return {"verdict": llm.invoke([{"role": "user", "content": prompt}]).content}

    graph = StateGraph(State)
    graph.add_node("solver", solver)
    graph.add_node("judge", judge)
    graph.add_edge(START, "solver")
    graph.add_edge("solver", "judge")
    graph.add_edge("judge", END)
    return graph.compile()


def says_yes(verdict: str) -> bool:
    """The judge's verdict: the first "yes" or "no" it says (anything else counts as no)."""
    found = re.search(r"\b(yes|no)\b", verdict, re.IGNORECASE)
    return found is not None and found[1].lower() == "yes"


@tracerl.rollout(timeout_s=120)
def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> dict:
    llm = config.chat_openai()  # ChatOpenAI on this episode's session URL, one connection pool for all
    state = build(llm).invoke({"question": ARITHMETIC.messages(task)})
    correct = ARITHMETIC.is_correct(task, state["answer"])
    tracerl.emit_reward(float(says_yes(state["verdict"]) == correct), agent="judge")  # the judge's own reward
    return {"reward": float(correct), "is_correct": correct}  # the episode's reward: the solver's


if __name__ == "__main__":
    run(solve, __doc__.splitlines()[0])
