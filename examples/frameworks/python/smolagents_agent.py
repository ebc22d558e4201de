"""The calculator agent with smolagents' `ToolCallingAgent` and its OpenAI-compatible model class
(`OpenAIModel`), as its docs teach.

    python smolagents_agent.py TASK.json OUTPUT.json   (OPENAI_BASE_URL, OPENAI_API_KEY)

The stock ToolCallingAgent system prompt is about 3.6k tokens, more than the embedded model's
1,024-token context holds, so this agent replaces it through the documented override: the
`prompt_templates` argument, the stock templates with a short `system_prompt`.
"""

import importlib.resources
import os

import yaml
from smolagents import OpenAIModel, ToolCallingAgent, tool
from smolagents.agents import PromptTemplates

import calculator
from calculator import MAX_TOKENS, MAX_TURNS, MODEL, read_question, write_answer

# The tools' schemas reach the model with the request (`tools`), so the prompt need not list them.
SHORT_SYSTEM_PROMPT = "Solve the task with the tools. Give the result with final_answer."


@tool
def calc(x: str) -> str:
    """Evaluates an arithmetic expression with integers, + - * and parentheses.

    Args:
        x: The expression, such as "6 * 7".
    """
    return calculator.calc(x)


def short_prompt_templates() -> PromptTemplates:
    """The stock ToolCallingAgent templates with the short system prompt in place of its own."""
    stock = importlib.resources.files("smolagents.prompts").joinpath("toolcalling_agent.yaml")
    templates: PromptTemplates = yaml.safe_load(stock.read_text(encoding="utf-8"))
    templates["system_prompt"] = SHORT_SYSTEM_PROMPT
    return templates


def main() -> None:
    model = OpenAIModel(
        model_id=MODEL,
        api_base=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ["OPENAI_API_KEY"],
        temperature=0,
        max_tokens=MAX_TOKENS,
    )
    agent = ToolCallingAgent(
        tools=[calc],
        model=model,
        prompt_templates=short_prompt_templates(),
        # A run that reaches max_steps asks the model once more for a final answer, with the whole
        # memory: two steps (each a reply and an error or observation) keep that within 1,024 tokens.
        max_steps=MAX_TURNS - 2,
        verbosity_level=0,
    )
    write_answer(agent.run(read_question()))


if __name__ == "__main__":
    main()
