"""``tracerl init DIR``: a runnable project (an app, its data, a reward, a config) to start from.

The files are templates here, not package data, so that an install without package data still
has them. Each app is the same agent in one framework; all of them work against the bundled tiny
model as written, which is why the data are single-digit arithmetic and the system prompt is the
one that model was trained on.
"""

from __future__ import annotations

import json
import random
import re
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from tracerl.core.errors import ConfigError


class Framework(str, Enum):
    langgraph = "langgraph"
    langchain = "langchain"
    openai_agents = "openai-agents"
    litellm = "litellm"


# The tiny model was trained on exactly this system prompt; a real model reads anything.
_SYSTEM = '''# The bundled tiny model was trained on exactly this system prompt; with a real model, write your own.
SYSTEM = "End your reply with: The answer is <answer>."
MAX_CALLS = 3  # model calls per episode: a tool call, the answer, one spare
'''

# The tool every template offers the model: tracerl's safe evaluator (no eval, bounded input),
# under the name and description the bundled tiny model was trained to call.
_CALCULATOR = '''def calculator(expression: str) -> str:
    """Evaluate + - * and parentheses on integers."""
    return evaluate(expression)  # the value, or "error: ..." for the model to read and retry
'''
_EVALUATE = "from tracerl.tasks.synthetic import calculator as evaluate\n"

# How the app reaches its model in production (run): the server the environment names, as the
# OpenAI SDK reads it; `tracerl gateway serve` on 127.0.0.1:8000 when nothing is set.
_SERVER = '''

def server():
    """The model server production uses (the environment's, as the OpenAI SDK reads it; read at
    each run, so that `tracerl eval --agent app.py:run` can point it at its own gateway)."""
    return (os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1"), os.environ.get("OPENAI_API_KEY", "tracerl"),
            os.environ.get("MODEL", "tracerl-tiny"))
'''

LANGGRAPH = '''"""The agent: a LangGraph graph of a model node and a calculator tool node."""

import os
from typing import Annotated, TypedDict

from langchain_core.messages import AnyMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import ToolNode

import tracerl
{evaluate}
tracerl.instrument("langgraph")  # the one adapter line: the graph's model calls become spans

{system}

@tool
{calculator}

class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def build(llm):
    model = llm.bind_tools([calculator])

    def route(state: State) -> str:
        calls = sum(m.type == "ai" for m in state["messages"])
        return "tools" if state["messages"][-1].tool_calls and calls < MAX_CALLS else END

    graph = StateGraph(State)
    graph.add_node("agent", lambda state: {{"messages": [model.invoke(state["messages"])]}})
    graph.add_node("tools", ToolNode([calculator]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile()


def answer(llm, question):
    result = build(llm).invoke({{"messages": [("system", SYSTEM), ("user", question)]}})
    return result["messages"][-1].content  # what it answered; reward.py grades it


@tracerl.rollout(timeout_s=120)
def solve(task, config):
    return answer(config.chat_openai(), task.data["question"])  # this episode's model, on one shared pool

{server}

def run(question):
    """The app as production calls it, greedy: each graph run is one episode of its traces."""
    base_url, api_key, model = server()
    return answer(ChatOpenAI(base_url=base_url, api_key=api_key, model=model, temperature=0), question)  # greedy
'''

LANGCHAIN = '''"""The agent: a LangChain chat model with a calculator tool, in a tool-calling loop."""

import os

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

import tracerl
{evaluate}
tracerl.instrument("langchain")  # the one adapter line: LangChain's model calls become spans

{system}

@tool
{calculator}

def answer(llm, question):
    model = llm.bind_tools([calculator])
    messages = [SystemMessage(SYSTEM), HumanMessage(question)]
    for _ in range(MAX_CALLS):
        reply = model.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            break
        messages += [calculator.invoke(call) for call in reply.tool_calls]  # ToolMessages
    return reply.content  # what it answered; reward.py grades it


@tracerl.rollout(timeout_s=120)
def solve(task, config):
    return answer(config.chat_openai(), task.data["question"])  # this episode's model, on one shared pool

{server}

def run(question):
    """The app as production calls it (see production.py)."""
    base_url, api_key, model = server()
    with tracerl.app_run("solver"):  # the loop's model calls are one run of the app: one episode
        return answer(ChatOpenAI(base_url=base_url, api_key=api_key, model=model, temperature=0), question)
'''

OPENAI_AGENTS = '''"""The agent: an OpenAI Agents SDK Agent with a calculator function tool."""

import os

from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool
from agents.exceptions import MaxTurnsExceeded
from openai import AsyncOpenAI

import tracerl
{evaluate}
tracerl.instrument("openai-agents")  # the one adapter line; nothing is uploaded to OpenAI

{system}

@function_tool
{calculator}

async def answer(model, question, settings=None):
    agent = Agent(name="solver", instructions=SYSTEM, tools=[calculator], model=model,
                  model_settings=settings or ModelSettings())
    try:
        result = await Runner.run(agent, question, max_turns=MAX_CALLS)
    except MaxTurnsExceeded:
        return ""  # it kept calling the tool: no answer, which reward.py scores 0
    return result.final_output  # what it answered; reward.py grades it


@tracerl.rollout(timeout_s=120)
async def solve(task, config):
    # this episode's session, on the process's one connection pool
    model = OpenAIChatCompletionsModel(model=config.model, openai_client=config.async_openai_client())
    settings = ModelSettings(temperature=config.sampling["temperature"], max_tokens=config.sampling.get("max_tokens"))
    return await answer(model, task.data["question"], settings)

{server}

async def run(question):
    """The app as production calls it: each Runner.run is one episode of its traces."""
    base_url, api_key, model = server()
    client = AsyncOpenAI(base_url=base_url, api_key=api_key)
    return await answer(OpenAIChatCompletionsModel(model=model, openai_client=client), question,
                        ModelSettings(temperature=0))  # greedy
'''

LITELLM = '''"""The agent: a LiteLLM tool-calling loop with a calculator tool."""

import json
import os

import litellm

import tracerl
{evaluate}
tracerl.instrument("litellm")  # the one adapter line: litellm.completion calls become spans

{system}

{calculator}

TOOLS = [{{"type": "function", "function": {{
    "name": "calculator", "description": "Evaluate + - * and parentheses on integers.",
    "parameters": {{"type": "object", "properties": {{"expression": {{"type": "string"}}}}, "required": ["expression"]}},
}}}}]


def answer(options, question):
    messages = [{{"role": "system", "content": SYSTEM}}, {{"role": "user", "content": question}}]
    for _ in range(MAX_CALLS):
        reply = litellm.completion(**options, messages=messages, tools=TOOLS).choices[0].message
        messages.append(reply.model_dump(exclude_none=True))
        if not reply.tool_calls:
            break
        for call in reply.tool_calls:
            try:
                expression = str(json.loads(call.function.arguments or "{{}}").get("expression", ""))
            except (ValueError, AttributeError) as exc:
                expression = f"error: {{exc}}"
            messages.append({{"role": "tool", "tool_call_id": call.id, "content": calculator(expression)}})
    return reply.content or ""  # what it answered; reward.py grades it


@tracerl.rollout(timeout_s=120)
def solve(task, config):
    # this episode's model and sampling, on the process's one connection pool
    return answer(config.litellm_kwargs(), task.data["question"])

{server}

def run(question):
    """The app as production calls it (see production.py)."""
    base_url, api_key, model = server()
    with tracerl.app_run("solver"):  # the loop's model calls are one run of the app: one episode
        options = {{"model": f"openai/{{model}}", "api_base": base_url, "api_key": api_key, "temperature": 0}}
        return answer(options, question)  # greedy
'''

APPS = {Framework.langgraph: LANGGRAPH, Framework.langchain: LANGCHAIN,
        Framework.openai_agents: OPENAI_AGENTS, Framework.litellm: LITELLM}

REWARD = '''"""The reward: kept outside the app, so the same app can be graded another way without a change.

tracerl calls grade(task, artifacts) once each episode has ended: task.answer is the row's
"answer" column, task.data the whole row, artifacts["answer"] the text the app returned.
"""


def grade(task, artifacts):
    # Strict on purpose: only a reply that ends the way the system prompt asks earns the reward,
    # so training teaches the format as well as the sum (a lenient grader would reward "Answer: 7").
    text = (artifacts.get("answer") or "").strip()
    return 1.0 if text.endswith(f"The answer is {task.answer}.") else 0.0
'''

CONFIG = '''# tracerl train --config config.yaml, run from this folder (the paths below are relative to it).
# Any setting can be changed on the command line too: --steps 40, --set optim.lr=0.0005.
data:
  path: tasks.jsonl     # one task per line: its "question" is what the app reads, "answer" what reward.py checks
  holdout: 0.2          # a fifth of the rows (chosen by a hash of each row, so always the same) for accuracy
agent: app.py:solve
reward: reward.py:grade
steps: 20               # sized for a CPU and the bundled tiny model: a few minutes
batch_size: 8           # tasks per step
group_size: 8           # rollouts per task, compared with each other (GRPO)
eval_size: 64           # held-out tasks measured before and after training (all of them here)
eval_every: 0           # measure only before and after
save_every: 0           # one checkpoint, at the end
seed: 0
output: runs/train      # metrics.jsonl, checkpoints/ and traces.db
'''

PRODUCTION = '''"""The app as production runs it: each question of tasks.jsonl through app.run, against the model
server OPENAI_BASE_URL names (default `tracerl gateway serve` on 127.0.0.1:8000, which records
every call's token ids), no tracerl session anywhere: each run is one episode of the trace store,
and the reward given after it attaches to it. `tracerl train --from-traces` trains on those
traces (README.md). In a real app the reward is whatever you learn after the run (a user's
thumbs-up, a test that passed); here reward.py grades the reply against the row's answer.
"""

import asyncio
import inspect
import json
import os

os.environ.setdefault("OTEL_SERVICE_NAME", "{service}")  # the app's name in the trace store (before app.py instruments)

import time  # noqa: E402
import urllib.request  # noqa: E402

import app  # noqa: E402
import reward  # noqa: E402

import tracerl  # noqa: E402


def wait_for_server(seconds=120):
    """A gateway started just before (`tracerl gateway serve &`) loads its model first: wait for it."""
    health = app.server()[0].removesuffix("/v1") + "/health"
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(health, timeout=5).close()
            return
        except OSError as exc:
            if time.monotonic() > deadline:
                raise SystemExit(f"no model server answers at {{health}} ({{exc}}); start one: tracerl gateway serve")
            time.sleep(0.5)


wait_for_server()
runs = 0
for line in open("tasks.jsonl", encoding="utf-8"):
    row = json.loads(line)
    reply = app.run(row["question"])
    if inspect.isawaitable(reply):
        reply = asyncio.run(reply)
    tracerl.set_task(row)  # which task the run was: held-out rows stay held out when training on these traces
    tracerl.emit_reward(reward.grade(tracerl.Task(id=row["id"], data=row, answer=row["answer"]), {{"answer": reply}}))
    runs += 1
tracerl.setup_tracing().flush()
print(f"{{runs}} runs of the app recorded, each one episode with its reward")
'''

README = '''# {name}

An agent ({framework}) that tracerl trains with reinforcement learning from its traces:
`app.py` is the agent, `tasks.jsonl` its questions, `reward.py` grades what it answers, and
`config.yaml` sets up training. The questions are single-digit sums because the model trained by
default is the tiny one bundled with tracerl; with a real model (`--model`), use your own data.

Run these from this folder:

```
tracerl eval --data tasks.jsonl --agent app.py:solve --reward reward.py:grade
tracerl train --config config.yaml
tracerl traces show EPISODE --db runs/train/traces.db
```

The first measures the agent as it is; the second trains it (accuracy before and after is
printed; metrics in `runs/train/metrics.jsonl`); the third shows one episode's trace, with an
EPISODE id from `tracerl traces list --db runs/train/traces.db`.

## Train on what the app did in production

`app.run(question)` is the app as production calls it, with no tracerl session: the one
`tracerl.instrument` line makes each run one episode, and a reward given right after it
attaches to that episode. Record its runs, export them, train on them:

```
tracerl gateway serve &
python production.py
tracerl traces export app.jsonl --service {service}
tracerl train --from-traces app.jsonl --data tasks.jsonl --holdout 0.2 --agent app.py:run --reward reward.py:grade --output runs/from-traces
```

The gateway serves the policy on 127.0.0.1:8000 and records every call's token ids;
`production.py` runs each question through the app against it; the export keeps this app's
episodes (its `service.name`); training keeps the rewarded ones, leaves the held-out rows'
runs out, and measures the app itself (`--agent app.py:run`) on those rows before and after.
'''

FILES = ("app.py", "tasks.jsonl", "reward.py", "config.yaml", "production.py", "README.md")


def task_rows(n: int = 60, seed: int = 0) -> list[dict[str, object]]:
    """``n`` distinct single-digit questions, the same every time: what the tiny model can learn."""
    problems = sorted({(a, op, b) for a in range(10) for b in range(10) for op in "+-*" if op != "-" or a >= b})
    rows = []
    for i, (a, op, b) in enumerate(random.Random(seed).sample(problems, n), 1):
        answer = a + b if op == "+" else a - b if op == "-" else a * b
        rows.append({"id": f"q{i:03d}", "question": f"What is {a} {op} {b}?", "answer": answer})
    return rows


def service_name(name: str) -> str:
    """The project's name as an OpenTelemetry service name (letters, digits, - _ .)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "app"


def render(framework: Framework, name: str) -> dict[str, str]:
    """The project's files, by name."""
    app = APPS[framework].format(system=_SYSTEM, evaluate=_EVALUATE, calculator=_CALCULATOR, server=_SERVER)
    return {
        "app.py": app,
        "tasks.jsonl": "".join(json.dumps(row) + "\n" for row in task_rows()),
        "reward.py": REWARD,
        "config.yaml": CONFIG,
        "production.py": PRODUCTION.format(service=service_name(name)),
        "README.md": README.format(name=name, framework=framework.value, service=service_name(name)),
    }


def init(
    directory: Annotated[Path, typer.Argument(help="folder to create the project in (new or empty)")],
    framework: Annotated[Framework, typer.Option(help="the framework the agent is written in")] = Framework.langgraph,
    force: Annotated[bool, typer.Option("--force", help="write into a non-empty folder, replacing these files")] = False,
) -> None:
    """Create a runnable project: an agent, its tasks, a reward function and a training config."""
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"{directory} is a file; name a new or empty folder")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise ConfigError(f"{directory} is not empty; name a new or empty folder, or pass --force to write "
                          f"{', '.join(FILES)} into it")
    directory.mkdir(parents=True, exist_ok=True)
    for filename, text in render(framework, directory.resolve().name).items():
        (directory / filename).write_text(text, encoding="utf-8")
    typer.echo(f"wrote a {framework.value} project to {directory}: {', '.join(FILES)}\n\nnext:\n  cd {directory}\n"
               "  tracerl eval --data tasks.jsonl --agent app.py:solve --reward reward.py:grade\n"
               "  tracerl train --config config.yaml\n"
               "  tracerl traces list --db runs/train/traces.db\n"
               "  tracerl traces show EPISODE --db runs/train/traces.db\n\n"
               "README.md shows the other loop: run the app as production does, then train on its traces")
