"""The calculator task for mini-swe-agent through its Python API (`DefaultAgent` with a
`LitellmModel` and a `LocalEnvironment`), as its docs teach. mini-swe-agent has one tool, a shell:
the agent computes with a command such as `expr 6 \\* 7` and submits the way mini-swe-agent
expects, a command whose output starts with the line COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT.
Its model goes through litellm: an `openai/` model name at OPENAI_BASE_URL.

    python mini_swe_agent.py TASK.json OUTPUT.json   (OPENAI_BASE_URL, OPENAI_API_KEY)
"""

import os
import tempfile

# litellm fetches its model price list from the internet on import unless told to use its own copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")

from minisweagent.agents.default import DefaultAgent  # noqa: E402
from minisweagent.environments.local import LocalEnvironment  # noqa: E402
from minisweagent.models.litellm_model import LitellmModel  # noqa: E402

from calculator import MAX_TURNS, MODEL, read_question, write_answer  # noqa: E402

# mini-swe-agent's stock templates ask for a software-engineering workflow in ~1k tokens; the
# embedded model's context is 1,024 tokens, so these are short and about the one task.
SYSTEM_TEMPLATE = "You solve tasks with the bash tool. Each call runs one command."
INSTANCE_TEMPLATE = """Task: {{task}}
Compute the answer with a command such as `expr 6 \\* 7`. To submit, run
`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && expr 6 \\* 7` with your own expression."""


def main() -> None:
    model = LitellmModel(
        model_name=f"openai/{MODEL}",
        model_kwargs={
            "api_base": os.environ["OPENAI_BASE_URL"],
            "api_key": os.environ["OPENAI_API_KEY"],
            "temperature": 0,
            "max_tokens": 64,
        },
        cost_tracking="ignore_errors",  # a self-hosted model has no price
    )
    with tempfile.TemporaryDirectory() as workdir:
        agent = DefaultAgent(
            model,
            LocalEnvironment(cwd=workdir, timeout=10),
            system_template=SYSTEM_TEMPLATE,
            instance_template=INSTANCE_TEMPLATE,
            step_limit=MAX_TURNS,
        )
        result = agent.run(read_question())
    write_answer(result.get("submission") or None)


if __name__ == "__main__":
    main()
