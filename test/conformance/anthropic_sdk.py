"""Runs the Messages API conformance scenarios with the official anthropic Python SDK against one endpoint.

Usage: python anthropic_sdk.py SCENARIOS_JSON BASE_URL API_KEY MODEL   (BASE_URL ends in /v1, as the openai SDKs take it)
Prints one JSON object on stdout: scenario name -> what the SDK gave the caller (plain data).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from anthropic import Anthropic, APIStatusError
from openai_sdk import plain, substitute, with_extra_body


def run(client: Anthropic, scenario: dict[str, Any], model: str) -> Any:
    params = with_extra_body(client.messages.create, substitute(scenario["params"], model))
    kind = scenario["kind"]
    if kind == "create":
        result = client.messages.create(**params)
        return [plain(event) for event in result] if params.get("stream") else plain(result)
    if kind == "stream-helper":
        with client.messages.stream(**params) as stream:
            events = [event.type for event in stream]
            return {"events": events, "final": plain(stream.get_final_message())}
    raise ValueError(f"unknown scenario kind {kind}")


def main() -> None:
    scenarios_file, base_url, api_key, model = sys.argv[1:5]
    with open(scenarios_file, encoding="utf-8") as f:
        scenarios = json.load(f)["scenarios"]
    client = Anthropic(base_url=base_url.removesuffix("/v1"), api_key=api_key, max_retries=0)
    results: dict[str, Any] = {}
    for scenario in scenarios:
        try:
            results[scenario["name"]] = run(client, scenario, model)
        except APIStatusError as err:
            results[scenario["name"]] = {"error": {"status": err.status_code, "body": err.body}}
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
