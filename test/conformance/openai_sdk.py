"""Runs conformance scenarios (chat, completions, responses) with the official openai Python SDK against one endpoint.

Usage: python openai_sdk.py SCENARIOS_JSON BASE_URL API_KEY MODEL
Prints one JSON object on stdout: scenario name -> what the SDK gave the caller (plain data).
"""

from __future__ import annotations

import inspect
import json
import sys
from typing import Any, Callable

from openai import APIStatusError, OpenAI


def plain(value: Any) -> Any:
    """What the caller sees, as JSON data: the SDK's objects dumped with only the fields the wire carried."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_unset=True)
    return value


def substitute(params: dict[str, Any], model: str) -> dict[str, Any]:
    return json.loads(json.dumps(params).replace('"$MODEL"', json.dumps(model)))


def with_extra_body(method: Callable[..., Any], params: dict[str, Any]) -> dict[str, Any]:
    """Parameters the SDK does not know (vLLM's return_token_ids) go in extra_body, as a harness would send them."""
    known = inspect.signature(method).parameters
    extra = {k: v for k, v in params.items() if k not in known}
    kwargs = {k: v for k, v in params.items() if k in known}
    return {**kwargs, "extra_body": extra} if extra else kwargs


def run_responses(client: OpenAI, scenario: dict[str, Any], model: str) -> Any:
    params = with_extra_body(client.responses.create, substitute(scenario["params"], model))
    if scenario["kind"] == "create":
        result = client.responses.create(**params)
        return [plain(event) for event in result] if params.get("stream") else plain(result)
    if scenario["kind"] == "stream-helper":
        with client.responses.stream(**params) as stream:
            events = [event.type for event in stream]
            return {"events": events, "final": plain(stream.get_final_response())}
    raise ValueError(f"unknown scenario kind {scenario['kind']} for responses")


def run(client: OpenAI, scenario: dict[str, Any], model: str) -> Any:
    if scenario["endpoint"] == "responses":
        return run_responses(client, scenario, model)
    api = client.chat.completions if scenario["endpoint"] == "chat" else client.completions
    params = with_extra_body(api.create, substitute(scenario["params"], model))
    kind = scenario["kind"]
    if kind == "create":
        result = api.create(**params)
        if params.get("stream"):
            return [plain(chunk) for chunk in result]
        return plain(result)
    if kind == "stream-helper":
        with client.chat.completions.stream(**params) as stream:
            events = [event.type for event in stream]
            return {"events": events, "final": plain(stream.get_final_completion())}
    if kind == "abort":
        stream = api.create(**params)
        first = next(iter(stream))
        stream.close()
        return plain(first)
    raise ValueError(f"unknown scenario kind {kind}")


def main() -> None:
    scenarios_file, base_url, api_key, model = sys.argv[1:5]
    with open(scenarios_file, encoding="utf-8") as f:
        scenarios = json.load(f)["scenarios"]
    client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    results: dict[str, Any] = {}
    for scenario in scenarios:
        try:
            results[scenario["name"]] = run(client, scenario, model)
        except APIStatusError as err:
            results[scenario["name"]] = {"error": {"status": err.status_code, "body": err.body}}
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
