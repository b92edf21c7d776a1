"""`omniforge agents apply|list`, run as a user runs them: in-process on the service's own
database, or through the running service with a token. Applying the same files again creates
nothing; a changed file makes exactly one new version; a bad file changes nothing."""

import asyncio
import contextlib
import getpass
import io
import os
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from app import cli
from tests.service import JWT_SECRET, MODEL, Service
from tests.test_cli import _omniforge

ADMIN = ("tenant_admin",)
HELPER = """\
name: helper
description: Answers briefly.
instructions: |
  Answer in one sentence.
tools: [calculator]
temperature: 0.2
budget:
  max_llm_calls: 4
metadata:
  owner: support
"""
SUMMARIZER = f"""\
name: summarizer
model: {MODEL}
on_limit: answer
metadata:
  released: 2026-01-31
response_format:
  type: object
  properties:
    summary: {{type: string}}
  required: [summary]
"""


def _settings_env(service: Service) -> dict[str, str]:
    """What makes the command use the service's database, model list and secret."""
    settings = service.settings
    return {
        "OMNIFORGE_ENV": "development",
        "OMNIFORGE_DATA_DIR": str(settings.data_dir),
        "OMNIFORGE_DATABASE_URL": str(settings.database_url),
        "OMNIFORGE_MODELS_FILE": str(settings.models_file),
        "OMNIFORGE_DEFAULT_MODEL": settings.default_model,
        "OMNIFORGE_JWT_SECRET": JWT_SECRET,
    }


async def _omniforge_here(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """`omniforge …` as `_omniforge` runs it, but in a thread of this process: the same
    `main`, without the command's four-second start (LiteLLM's import) each time."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OMNIFORGE_")}

    def run() -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with (
            mock.patch.dict(os.environ, {**clean, **(env or {})}, clear=True),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            code = cli.main(list(args))
        return code, out.getvalue(), err.getvalue()

    return await asyncio.to_thread(run)


def _definitions(directory: Path, **files: str) -> Path:
    directory.mkdir(exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory


async def _apply(
    service: Service, tenant: str, path: Path, mode: str, *, subprocess: bool = False
) -> tuple[int, str, str]:
    run = _omniforge if subprocess else _omniforge_here
    if mode == "in-process":
        return await run(
            "agents", "apply", "-f", str(path), "--tenant", tenant, env=_settings_env(service)
        )
    token = service.token(tenant, sub="ops", roles=ADMIN)
    return await run(
        "agents", "apply", "-f", str(path), "--server", service.base_url, "--token", token
    )


async def _versions(service: Service, tenant: str, name: str) -> list[dict[str, Any]]:
    async with service.client(tenant, sub="root", roles=ADMIN) as admin:
        response = await admin.get(f"/api/v1/agents/{name}/versions")
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


@pytest.mark.parametrize("mode", ["in-process", "server"])
async def test_applying_the_same_files_again_creates_nothing_and_a_change_one_version(
    service: Service, tenant: str, tmp_path: Path, mode: str
) -> None:
    directory = _definitions(
        tmp_path / "agents",
        **{"b-helper.yaml": HELPER, "a-summarizer.yml": SUMMARIZER, "notes.txt": "not a def"},
    )

    first = await _apply(service, tenant, directory, mode, subprocess=True)
    second = await _apply(service, tenant, directory, mode)
    (directory / "b-helper.yaml").write_text(
        HELPER.replace("Answer in one sentence.", "Answer in two sentences."), encoding="utf-8"
    )
    third = await _apply(service, tenant, directory, mode)

    assert first == (0, "summarizer: created (v1)\nhelper: created (v1)\n", ""), first
    assert second == (0, "summarizer: unchanged (v1)\nhelper: unchanged (v1)\n", ""), second
    assert third == (0, "summarizer: unchanged (v1)\nhelper: updated to v2\n", ""), third
    [summarizer] = await _versions(service, tenant, "summarizer")
    assert summarizer["version"] == 1
    assert summarizer["metadata"] == {"released": "2026-01-31"}  # a date is its text in JSON
    assert summarizer["response_format"]["required"] == ["summary"]
    v2, v1 = await _versions(service, tenant, "helper")
    assert (v2["version"], v2["instructions"]) == (2, "Answer in two sentences.\n")
    assert (v1["version"], v1["instructions"]) == (1, "Answer in one sentence.\n")
    assert (v1["tools"], v1["temperature"], v1["metadata"]) == (
        ["calculator"],
        0.2,
        {"owner": "support"},
    )
    assert v1["budget"]["max_llm_calls"] == 4
    actor = f"cli:{getpass.getuser()}" if mode == "in-process" else "ops"
    assert v2["version_created_by"] == v1["created_by"] == actor


async def test_a_field_a_changed_file_drops_is_reset_in_the_new_version(
    service: Service, tenant: str, tmp_path: Path
) -> None:
    path = tmp_path / "helper.yaml"
    path.write_text(HELPER, encoding="utf-8")
    await _apply(service, tenant, path, "in-process")
    path.write_text(HELPER.replace("temperature: 0.2\n", ""), encoding="utf-8")

    code, out, err = await _apply(service, tenant, path, "server")

    assert (code, out, err) == (0, "helper: updated to v2\n", "")
    newest, _ = await _versions(service, tenant, "helper")
    assert newest["temperature"] is None
    assert newest["tools"] == ["calculator"]


BAD_FILES = {
    "a-good.yaml": HELPER.replace("name: helper", "name: good"),
    "b-not-yaml.yaml": "name: [unclosed\n",
    "c-not-a-mapping.yaml": "- name: listed\n",
    "d-invalid.yaml": "name: Bad Name\ntemperature: 9\ntools: [calculator, 'a b']\ncolour: red\n",
    "e-duplicate.yaml": HELPER.replace("name: helper", "name: good"),
    "f-nul.yaml": 'name: nul\ninstructions: "a \\0 b"\n',
    "g-builtin.yaml": "name: default\n",
    "h-binary.yaml": 'name: bin\nmetadata:\n  blob: !!binary "gIGC"\n',
    "i-loop.yaml": "name: loop\nmetadata: &self\n  again: *self\n",
    "j-infinite.yaml": "name: inf\ntemperature: .inf\n",
}
BAD_LINES = [
    "b-not-yaml.yaml: not valid YAML: expected ',' or ']', but got '<stream end>' (line 2, ",
    "c-not-a-mapping.yaml: must be a mapping of an agent's fields",
    "d-invalid.yaml: tools.1: String should match pattern",
    "d-invalid.yaml: temperature: Input should be less than or equal to 2",
    "d-invalid.yaml: name: String should match pattern",
    "d-invalid.yaml: colour: Extra inputs are not permitted",
    "e-duplicate.yaml: agent 'good' is also defined in ",
    "f-nul.yaml: instructions: must not contain U+0000 (NUL)",
    "g-builtin.yaml: name: 'default' is the built-in agent's name",
    "h-binary.yaml: metadata.blob: not a JSON value (bytes)",
    "i-loop.yaml: metadata.again.again.again.again.again.again.again.again.again.again.again.",
    "j-infinite.yaml: temperature: inf is not a JSON number",
]


@pytest.mark.parametrize("mode", ["in-process", "server"])
async def test_bad_files_print_one_line_per_problem_and_change_nothing(
    service: Service, tenant: str, tmp_path: Path, mode: str
) -> None:
    directory = _definitions(tmp_path / "agents", **BAD_FILES)

    code, out, err = await _apply(service, tenant, directory, mode)

    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert len(lines) == len(BAD_LINES), err
    for line, expected in zip(lines, BAD_LINES, strict=True):
        assert line.startswith(f"omniforge: {directory}/{expected}"), (line, expected)
    async with service.client(tenant, sub="root", roles=ADMIN) as admin:
        listed = (await admin.get("/api/v1/agents")).json()["items"]
    assert [agent["name"] for agent in listed] == ["default"]


async def test_a_definition_the_tenant_cannot_run_applies_nothing_in_process(
    service: Service, tenant: str, tmp_path: Path
) -> None:
    directory = _definitions(
        tmp_path / "agents",
        **{
            "a-helper.yaml": HELPER,
            "b-odd.yaml": "name: odd\nmodel: no-such-model\ntools: [vault_store]\nkind: planner\n",
        },
    )

    code, out, err = await _apply(service, tenant, directory, "in-process")

    assert (code, out) == (2, "")
    prefix = f"omniforge: {directory}/b-odd.yaml: "
    assert err.splitlines() == [
        f"{prefix}kind: unknown kind 'planner' (auto, cot, direct, mcts, plan, react, tot)",
        f"{prefix}model: unknown model 'no-such-model'; available: {MODEL}, demo",
        f"{prefix}tools.0: unknown tool 'vault_store'",  # the service's own test tool
        # Whose models were checked: this machine's, which a running service need not share.
        f"omniforge: in-process, the models are this machine's configuration's, the model list "
        f"{service.settings.models_file}; a running service may have others: apply there with "
        "--server URL --token T",
    ]
    async with service.client(tenant, sub="root", roles=ADMIN) as admin:
        helper = await admin.get("/api/v1/agents/helper")
    assert helper.status_code == 404


async def test_through_the_server_a_refusal_stops_there_and_says_what_was_applied(
    service: Service, tenant: str, tmp_path: Path
) -> None:
    directory = _definitions(
        tmp_path / "agents",
        **{
            "a-helper.yaml": HELPER,
            "b-odd.yaml": "name: odd\nmodel: no-such-model\n",
            "c-summarizer.yaml": SUMMARIZER,
        },
    )
    member = service.token(tenant, sub="mia", roles=("member",))

    code, out, err = await _apply(service, tenant, directory, "server")
    forbidden = await _omniforge_here(
        "agents", "apply", "-f", str(directory), "--server", service.base_url, "--token", member
    )

    assert (code, out) == (2, "helper: created (v1)\n")
    assert err == (
        f"omniforge: {directory}/b-odd.yaml: model: unknown model 'no-such-model'; "
        f"available: {MODEL}, demo\n"
    )
    assert forbidden[0] == 1
    assert "needs the `agent:configure` permission" in forbidden[2]
    assert [v["version"] for v in await _versions(service, tenant, "helper")] == [1]


@pytest.mark.parametrize("mode", ["in-process", "server"])
async def test_list_shows_the_builtin_agent_then_each_agent_with_its_newest_version(
    service: Service, tenant: str, tmp_path: Path, mode: str
) -> None:
    directory = _definitions(tmp_path / "agents", **{"a.yaml": HELPER, "b.yaml": SUMMARIZER})
    await _apply(service, tenant, directory, "in-process")
    async with service.client(tenant, sub="root", roles=ADMIN) as admin:
        await admin.patch("/api/v1/agents/helper", json={"description": "Answers at length."})
        await admin.delete("/api/v1/agents/summarizer")
    if mode == "in-process":
        where = ["--tenant", tenant]
        env = _settings_env(service)
    else:
        token = service.token(tenant, sub="vic", roles=("viewer",))
        where = ["--server", service.base_url, "--token", token]
        env = {}

    active = await _omniforge_here("agents", "list", *where, env=env)
    every = await _omniforge_here("agents", "list", "--archived", *where, env=env)

    builtin = "default\tv1\tactive, built-in\tThe built-in ReAct agent"
    helper = "helper\tv2\tactive\tAnswers at length."
    summarizer = "summarizer\tv1\tarchived\t"
    assert active[0] == 0, active[2]
    lines = active[1].splitlines()
    assert lines[0].startswith(builtin)
    assert lines[1:] == [helper]
    assert every[1].splitlines()[1:] == [helper, summarizer]


async def test_apply_refuses_a_missing_path_and_a_server_without_a_token(
    tmp_path: Path,
) -> None:
    missing = await _omniforge_here("agents", "apply", "-f", str(tmp_path / "nope.yaml"))
    empty = await _omniforge_here("agents", "apply", "-f", str(tmp_path))
    tokenless = await _omniforge_here("agents", "list", "--server", "http://127.0.0.1:9")

    assert missing == (2, "", f"omniforge: {tmp_path}/nope.yaml: no such file or directory\n")
    assert empty == (2, "", f"omniforge: {tmp_path}: no *.yaml or *.yml file\n")
    assert tokenless[0] == 1
    assert "--server needs --token" in tokenless[2]
