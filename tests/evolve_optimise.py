"""A long scripted evolve run on a small optimisation target (issue 16: 200 rounds, kill -9, resume).

Run as a script: `python evolve_optimise.py WORKDIR ROUNDS BUDGET`. WORKDIR holds the project (made
once), the task, the store and PAGEDCTX_HOME. The generator is a deterministic hill climber that
reads the parent's `value()` from the code it is shown and proposes a step chosen by the attempt
number; every seventh attempt is a syntax error (a fault). Its answer depends only on the payload,
so a resumed run gets the same answer for the same attempt.
"""

from __future__ import annotations

import json
import re
import sys
import uuid
from pathlib import Path
from typing import Any

TARGET = 137
STEPS = (32, -32, 8, -8, 2, -2, 1, -1)
SCORE = (
    f"python -c \"import json, target; print(json.dumps({{'score': -abs(target.value() - {TARGET}), "
    "'value': target.value()}))\""
)
PYTEST = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -q -p no:cacheprovider"


def make_project(work: Path) -> tuple[Path, Path]:
    repo = work / "repo"
    if not repo.exists():
        (repo / "tests").mkdir(parents=True)
        (repo / "target.py").write_text('"""The value to tune."""\n\n\ndef value():\n    return 0\n')
        (repo / "tests" / "test_target.py").write_text(
            "from target import value\n\n\ndef test_value_is_int():\n    assert isinstance(value(), int)\n"
        )
    task = work / "task.json"
    if not task.exists():
        task.write_text(
            json.dumps(
                {
                    "task_id": str(uuid.uuid4()),
                    "goal": "tune value() so that the score (closeness to a hidden target) is as high "
                    "as it gets",
                    "pins": {"allowed_paths": ["target.py"], "forbidden_paths": ["tests/**"]},
                    "acceptance": {"pass_to_pass": ["tests/test_target.py::test_value_is_int"]},
                    "test_commands": [f"{PYTEST} tests --junitxml=$PAGEDCTX_REPORTS/junit.xml"],
                    "timeout_seconds": 120,
                    "score": {"command": SCORE, "key": "score"},
                }
            )
        )
    return repo, task


def proposal(number: int, payload: dict[str, Any]) -> int | None:
    """The value attempt `number` proposes (None: the syntax-error attempt)."""
    if number % 7 == 0:
        return None
    found = re.search(r"return (-?\d+)", payload["code"])
    current = int(found.group(1)) if found else 0
    return current + STEPS[number % len(STEPS)]


def answer(number: int, payload: dict[str, Any]) -> str:
    value = proposal(number, payload)
    body = "def value():\n    return (\n" if value is None else f"def value():\n    return {value}\n"
    mod = {
        "file_path": "target.py",
        "target_chunk_id": "target.py::value",
        "action_type": "MODIFY",
        "new_content": body,
        "reasoning": f"step to {value}",
    }
    return json.dumps(
        {
            "ok": True,
            "meta": {"confidence": 0.5, "risk": "low", "explain": "hill climbing"},
            "data": {"modifications": [mod], "rationale": f"attempt {number}: try {value}"},
        }
    )


def main(work: Path, rounds: int, budget: int) -> None:
    import os

    os.environ["PAGEDCTX_HOME"] = str(work / "home")
    from pagedctx.config import load_config
    from pagedctx.evolve import load_task, open_evolution
    from pagedctx.evolve.generator import ModuleGenerator
    from pagedctx.host.models.recorded import FunctionBackend
    from pagedctx.protocol.tokens import token_counter

    repo, task = make_project(work)
    config = load_config(overrides={"store": f"sqlite:///{work / 'state.db'}"})

    def reply(request: Any) -> str:
        payload, _ = json.JSONDecoder().raw_decode(request.user)
        return answer(int(payload["attempt"]), payload)

    backend = FunctionBackend(reply, model="hill-climber")
    generator = ModuleGenerator(backend, policy="scripted", counter=token_counter(config.tokenizer))
    resuming = (work / "started").exists()
    (work / "started").touch()
    with open_evolution(
        config=config,
        session_id="long",
        repo=None if resuming else repo,
        task=None if resuming else load_task(task),
        settings={"rounds": rounds, "budget": budget},
        generator=generator,
    ) as evolution:
        stop = evolution.run(on_attempt=lambda a: print(a.number, a.status, a.score, flush=True))
        print(json.dumps({"stop": stop.code, "attempts": stop.attempts}), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
