"""The four versions of the math agent in examples/ (one per framework), for the tests that
run them side by side."""

from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# framework name (tracerl.instrument's) -> the example module written with it
FRAMEWORKS = {
    "langgraph": "math_agent_langgraph",
    "langchain": "math_agent_langchain",
    "openai-agents": "math_agent_openai_agents",
    "litellm": "math_agent_litellm",
}
