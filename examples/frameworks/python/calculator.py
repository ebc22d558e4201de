"""The calculator task's shared parts, as examples/calculator-agent/harness.mjs has them: the `calc`
tool (integer arithmetic, evaluated without eval) and the harness contract (argv TASK.json
OUTPUT.json; the task has `question`; {"answer": ...} goes to OUTPUT)."""

import json
import re
import sys
from typing import Any


MODEL = "production"  # the alias the gateway serves
MAX_TURNS = 4
MAX_TOKENS = 48


def calculate(expression: str) -> int:
    """Integer arithmetic (+ - * and parentheses) by recursive descent; anything else is an error."""
    tokens = re.findall(r"\d+|[-+*()]", expression)
    if "".join(tokens) != re.sub(r"\s+", "", expression):
        raise ValueError(f"cannot evaluate {json.dumps(expression)}")
    at = 0

    def take() -> str | None:
        nonlocal at
        at += 1
        return tokens[at - 1] if at <= len(tokens) else None

    def primary() -> int:
        token = take()
        if token == "(":
            value = total()
            if take() != ")":
                raise ValueError("missing )")
            return value
        if token == "-":
            return -primary()
        if token is None or not token.isdigit():
            raise ValueError(f"unexpected {token or 'end'}")
        return int(token)

    def product() -> int:
        value = primary()
        while at < len(tokens) and tokens[at] == "*":
            take()
            value *= primary()
        return value

    def total() -> int:
        value = product()
        while at < len(tokens) and tokens[at] in "+-":
            value = value + product() if take() == "+" else value - product()
        return value

    value = total()
    if at != len(tokens):
        raise ValueError(f"unexpected {tokens[at]}")
    return value


def calc(x: str) -> str:
    """The tool's reply: the value, or the error for the model to read."""
    try:
        return str(calculate(x))
    except ValueError as err:
        return f"error: {err}"


def read_question() -> str:
    """The task's question from the TASK.json named first on the command line."""
    with open(sys.argv[1], encoding="utf-8") as file:
        task: dict[str, Any] = json.load(file)
    return str(task["question"])


def write_answer(answer: object) -> None:
    """{"answer": "..."} to the OUTPUT.json named second (null when the agent gave none)."""
    text = None if answer is None else str(answer).strip()
    with open(sys.argv[2], "w", encoding="utf-8") as file:
        json.dump({"answer": text}, file)
        file.write("\n")
