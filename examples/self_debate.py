"""Self-debate: two debaters (the same policy) answer the question, then over further rounds
each sees the other's last answer and answers again. A LangGraph graph with nodes
"debater_a" and "debater_b"; each debater's rounds are one growing conversation, so one
trajectory and one token sequence per debater. Each answer gets a per-step reward (right or
not, ``emit_reward(step=True)``); each debater's final answer its final reward; the episode's
reward is debater_b's final answer (the last word).

    python examples/self_debate.py --tasks 8
"""

from __future__ import annotations

from typing import TypedDict

from common import ARITHMETIC, run
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph

import tracerl

tracerl.instrument("langgraph")  # the one tracerl line

ROUNDS = 2
REBUTTAL = "The other agent answered: {other} Answer again."


class State(TypedDict):
    task: tracerl.Task
    debater_a: list[dict]  # each debater's conversation (OpenAI-style messages)
    debater_b: list[dict]


def last_answer(history: list[dict]) -> str:
    return history[-1]["content"] if history and history[-1]["role"] == "assistant" else ""


def build(llm: ChatOpenAI):
    def debater(me: str, other: str):
        def node(state: State) -> dict:
            history = list(state[me])
            if history:  # a later round: rebut the other's answer of the previous round
                rounds_other = [m for m in state[other] if m["role"] == "assistant"]
                seen = rounds_other[len([m for m in history if m["role"] == "assistant"]) - 1]
                history.append({"role": "user", "content": REBUTTAL.format(other=seen["content"])})
            else:
                history = ARITHMETIC.messages(state["task"])
            answer = llm.invoke(history).content
            tracerl.emit_reward(float(ARITHMETIC.is_correct(state["task"], answer)), step=True)  # this answer's
            return {me: [*history, {"role": "assistant", "content": answer}]}

        return node

    def next_round(state: State) -> str:
        done = sum(1 for m in state["debater_b"] if m["role"] == "assistant")
        return "debater_a" if done < ROUNDS else END

    graph = StateGraph(State)
    graph.add_node("debater_a", debater("debater_a", "debater_b"))
    graph.add_node("debater_b", debater("debater_b", "debater_a"))
    graph.add_edge(START, "debater_a")
    graph.add_edge("debater_a", "debater_b")
    graph.add_conditional_edges("debater_b", next_round)
    return graph.compile()


@tracerl.rollout(timeout_s=120)
def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> dict:
    llm = config.chat_openai()  # ChatOpenAI on this episode's session URL, one connection pool for all
    state = build(llm).invoke({"task": task, "debater_a": [], "debater_b": []})
    finals = {name: ARITHMETIC.is_correct(task, last_answer(state[name])) for name in ("debater_a", "debater_b")}
    for name, correct in finals.items():
        tracerl.emit_reward(float(correct), agent=name)
    return {"reward": float(finals["debater_b"]), "is_correct": finals["debater_b"]}


if __name__ == "__main__":
    run(solve, __doc__.splitlines()[0])
