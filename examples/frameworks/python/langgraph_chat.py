"""The calculator agent with LangGraph's prebuilt ReAct agent (`create_react_agent`) and
`langchain-openai`'s `ChatOpenAI` on the Chat Completions API, as their docs teach.

    python langgraph_chat.py TASK.json OUTPUT.json   (OPENAI_BASE_URL, OPENAI_API_KEY)
"""

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.errors import GraphRecursionError
from langgraph.prebuilt import create_react_agent

import calculator
from calculator import MAX_TOKENS, MAX_TURNS, MODEL, read_question, write_answer


@tool
def calc(x: str) -> str:
    """Evaluates an arithmetic expression with integers, + - * and parentheses."""
    return calculator.calc(x)


def main() -> None:
    # OPENAI_BASE_URL and OPENAI_API_KEY from the environment.
    model = ChatOpenAI(model=MODEL, temperature=0, max_tokens=MAX_TOKENS)
    # No `prompt` (it is optional): given one as a system message, the tiny embedded base answered
    # without its tool, so no tool loop ran. A real policy takes it.
    agent = create_react_agent(model, [calc])
    try:
        # Each turn is two graph steps (model, tools); the last model step answers.
        state = agent.invoke({"messages": [("user", read_question())]}, {"recursion_limit": 2 * MAX_TURNS})
        write_answer(state["messages"][-1].text)  # the reply's text, whatever its content blocks
    except GraphRecursionError:
        write_answer(None)


if __name__ == "__main__":
    main()
