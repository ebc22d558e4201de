"""The calculator agent with the OpenAI Agents SDK (`openai-agents`) on its default model, the
Responses API: the client is set once with `set_default_openai_client`, as its docs teach.

    python openai_agents_responses.py TASK.json OUTPUT.json   (OPENAI_BASE_URL, OPENAI_API_KEY)
"""

import asyncio

from agents import (
    Agent,
    MaxTurnsExceeded,
    ModelSettings,
    Runner,
    function_tool,
    set_default_openai_client,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

import calculator
from calculator import MAX_TOKENS, MAX_TURNS, MODEL, read_question, write_answer

set_tracing_disabled(True)  # traces would go to OpenAI's platform, which this agent never calls


@function_tool
def calc(x: str) -> str:
    """Evaluates an arithmetic expression with integers, + - * and parentheses."""
    return calculator.calc(x)


async def main() -> None:
    # OPENAI_BASE_URL and OPENAI_API_KEY from the environment; the SDK's default API is Responses.
    set_default_openai_client(AsyncOpenAI())
    # No `instructions` (they are optional): given them as a system message, the tiny embedded base
    # answered without its tool, so no tool loop ran. A real policy takes them.
    agent = Agent(
        name="calculator",
        tools=[calc],
        model=MODEL,
        model_settings=ModelSettings(temperature=0, max_tokens=MAX_TOKENS),
    )
    try:
        result = await Runner.run(agent, read_question(), max_turns=MAX_TURNS)
        write_answer(result.final_output)
    except MaxTurnsExceeded:
        write_answer(None)


if __name__ == "__main__":
    asyncio.run(main())
