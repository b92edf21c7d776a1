"""The sandbox tools: `run_code` (Python in the session's kernel), `run_shell` (a command or a
script) and `workspace_files` (list, read, write), all in the run's workspace
(`ToolServices.workspace`): a sandbox of the task's conversation (or of the task), with no
network, its system read-only, its limits the tenant's. Their output streams as the call's
progress; charts come back as images; a limit that stops a call fails it with `timeout` (wall
time) or `tool_error`, saying which limit and what the call printed before."""

import asyncio
import base64
import posixpath
from decimal import Decimal
from typing import Any

from app.chain import ErrorCode, ToolType
from app.sandbox import Execution
from app.tools.base import BaseTool
from app.tools.builtin.files import image_for_model
from app.tools.errors import FieldError, InvalidToolArguments, ToolError
from app.tools.models import (
    NO_RETRY,
    ModelImage,
    ToolCallContext,
    ToolDefinition,
    ToolOutput,
    ToolVisibilityConfig,
)
from app.tools.services import WorkspaceAccess, require

RUN_CODE = "run_code"
RUN_SHELL = "run_shell"
WORKSPACE_FILES = "workspace_files"
SANDBOX_TOOLS = (RUN_CODE, RUN_SHELL, WORKSPACE_FILES)
# What the model is shown of a call's output; the rest is counted, not lost to the reader of
# the chain's progress events.
MAX_SHOWN_CHARS = 20_000
MAX_IMAGES = 4
MAX_READ_BYTES = 1 << 20
MAX_WRITE_CHARS = 1 << 20
_LIMITS = {
    "wall_time": "its wall-time limit",
    "cpu_time": "its CPU-time limit",
    "memory": "its memory limit",
    "processes": "its process limit",
    "file_size": "its file-size limit",
    "workspace_size": "the workspace's size limit",
}
_IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}


def _workspace(context: ToolCallContext) -> WorkspaceAccess:
    return require(context.services.workspace if context.services else None, "workspace")


def _shown(text: str) -> str:
    if len(text) <= MAX_SHOWN_CHARS:
        return text
    return text[:MAX_SHOWN_CHARS] + f"\n[… {len(text) - MAX_SHOWN_CHARS} more characters]"


def _streamer(context: ToolCallContext) -> Any:
    def stream(name: str, text: str) -> None:
        context.progress(f"{name}: {text}")

    return stream


async def _outcome(
    tool: str, execution: Execution, workspace: WorkspaceAccess, cpu_second_usd: Decimal
) -> ToolOutput:
    """The call's result: its output, value and files; its new charts as images; its CPU
    seconds and their cost. A limit that stopped it fails the call (billed all the same)."""
    seconds = Decimal(str(execution.cpu_s))
    cost = seconds * cpu_second_usd
    value: dict[str, Any] = {
        "ok": execution.ok,
        "exit_code": execution.exit_code,
        "stdout": _shown(execution.stdout),
        "stderr": _shown(execution.stderr),
        "files": {
            "created": execution.created,
            "changed": execution.changed,
            "deleted": execution.deleted,
        },
        "cpu_s": execution.cpu_s,
        "wall_s": execution.wall_s,
    }
    if execution.dropped_bytes:
        value["output_dropped_bytes"] = execution.dropped_bytes
    if tool == RUN_CODE:
        value.update(value_repr=execution.value, error=execution.error, figures=execution.figures)
        if execution.restarted:
            value["note"] = "the Python session was started again: earlier variables are gone"
    if execution.stopped_by is not None:
        limit = _LIMITS.get(execution.stopped_by, execution.stopped_by)
        said = (execution.stderr or execution.error or execution.stdout).strip()[-2_000:]
        raise ToolError(
            f"{tool} was stopped at {limit} ({execution.stopped_by})"
            + (f"; it printed: {said}" if said else ""),
            error_code=ErrorCode.TIMEOUT
            if execution.stopped_by == "wall_time"
            else ErrorCode.TOOL_ERROR,
            sandbox_s=execution.cpu_s,
            cost_usd=cost,
        )
    images = await _images(execution, workspace)
    return ToolOutput(value=value, images=tuple(images), sandbox_s=execution.cpu_s, cost_usd=cost)


async def _images(execution: Execution, workspace: WorkspaceAccess) -> list[ModelImage]:
    """The images the call made (its charts, the image files it wrote), for a model that
    takes images."""
    paths = [*execution.figures]
    for entry in [*execution.created, *execution.changed]:
        path = str(entry["path"])
        if posixpath.splitext(path)[1].lower() in _IMAGE_TYPES and path not in paths:
            paths.append(path)
    images: list[ModelImage] = []
    for path in paths[:MAX_IMAGES]:
        data = await workspace.read(path, MAX_READ_BYTES)
        if data is None:
            continue
        media_type = _IMAGE_TYPES[posixpath.splitext(path)[1].lower()]
        _, image = await asyncio.to_thread(image_for_model, data, media_type)
        if image is not None:
            images.append(image)
    return images


class RunCodeTool(BaseTool):
    def __init__(self, timeout_s: float, cpu_second_usd: Decimal) -> None:
        self._price = cpu_second_usd
        self._definition = ToolDefinition(
            name=RUN_CODE,
            type=ToolType.SANDBOX,
            description="Runs Python code in this conversation's sandboxed workspace "
            "(/workspace, the current directory: its files, the conversation's attached "
            "files among them). Variables stay defined between calls while the workspace is "
            "live. numpy, pandas and matplotlib are installed; figures left open come back "
            "as images and PNG files. No network. The last line's value is returned.",
            parameters={
                "type": "object",
                "properties": {
                    "code": {"type": "string", "minLength": 1, "maxLength": 100_000},
                },
                "required": ["code"],
                "additionalProperties": False,
            },
            returns_description="{ok, value_repr, stdout, stderr, error (a traceback), "
            "figures, files: {created, changed, deleted}, cpu_s, wall_s}",
            timeout_s=timeout_s,
            retry=NO_RETRY,
            visibility=ToolVisibilityConfig(summary_template="Ran Python code"),
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        workspace = _workspace(context)
        execution = await workspace.python(arguments["code"], on_output=_streamer(context))
        return await _outcome(RUN_CODE, execution, workspace, self._price)


class RunShellTool(BaseTool):
    def __init__(self, timeout_s: float, cpu_second_usd: Decimal) -> None:
        self._price = cpu_second_usd
        self._definition = ToolDefinition(
            name=RUN_SHELL,
            type=ToolType.SANDBOX,
            description="Runs a shell command (`command`, run by /bin/sh) or a program "
            "(`argv`) in this conversation's sandboxed workspace (/workspace). The system's "
            "tools (coreutils, python3...) are there; no network.",
            parameters={
                "type": "object",
                "properties": {
                    "command": {"type": "string", "minLength": 1, "maxLength": 100_000},
                    "argv": {
                        "type": "array",
                        "items": {"type": "string", "maxLength": 10_000},
                        "minItems": 1,
                        "maxItems": 1_000,
                    },
                    "stdin": {"type": "string", "maxLength": 1_000_000},
                },
                "additionalProperties": False,
            },
            returns_description="{ok, exit_code, stdout, stderr, files: {created, changed, "
            "deleted}, cpu_s, wall_s}",
            timeout_s=timeout_s,
            retry=NO_RETRY,
            visibility=ToolVisibilityConfig(summary_template="Ran a command"),
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        command, argv = arguments.get("command"), arguments.get("argv")
        if (command is None) == (argv is None):
            raise InvalidToolArguments(
                RUN_SHELL, [FieldError("command", "give either `command` or `argv`")]
            )
        workspace = _workspace(context)
        execution = await workspace.run(
            argv, script=command, stdin=arguments.get("stdin"), on_output=_streamer(context)
        )
        return await _outcome(RUN_SHELL, execution, workspace, self._price)


class WorkspaceFilesTool(BaseTool):
    def __init__(self) -> None:
        self._definition = ToolDefinition(
            name=WORKSPACE_FILES,
            type=ToolType.SANDBOX,
            description="The files of this conversation's sandboxed workspace: `list` them, "
            "`read` one (text, or an image you can see), or `write` one (text).",
            parameters={
                "type": "object",
                "properties": {
                    "action": {"enum": ["list", "read", "write"]},
                    "path": {"type": "string", "minLength": 1, "maxLength": 1_000},
                    "content": {"type": "string", "maxLength": MAX_WRITE_CHARS},
                },
                "required": ["action"],
                "additionalProperties": False,
            },
            returns_description="list: {files: [{path, size}]}; read: {path, text} or an "
            "image; write: {path, size}",
            timeout_s=60,
            retry=NO_RETRY,
            visibility=ToolVisibilityConfig(summary_template="Workspace files: {action}"),
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        workspace = _workspace(context)
        action, path = arguments["action"], arguments.get("path")
        if action == "list":
            return ToolOutput(value={"files": await workspace.files()})
        if path is None:
            raise InvalidToolArguments(WORKSPACE_FILES, [FieldError("path", f"{action} needs it")])
        if action == "write":
            content = arguments.get("content")
            if content is None:
                raise InvalidToolArguments(
                    WORKSPACE_FILES, [FieldError("content", "write needs it")]
                )
            data = content.encode()
            try:
                await workspace.write(path, data)
            except ValueError as exc:
                raise InvalidToolArguments(
                    WORKSPACE_FILES, [FieldError("path", str(exc))]
                ) from None
            return ToolOutput(value={"path": path, "size": len(data)})
        data = await workspace.read(path, MAX_READ_BYTES + 1)
        if data is None:
            raise ToolError(f"the workspace has no file {path!r}", error_code=ErrorCode.NOT_FOUND)
        media_type = _IMAGE_TYPES.get(posixpath.splitext(path)[1].lower())
        if media_type is not None:
            value, image = await asyncio.to_thread(image_for_model, data, media_type)
            return ToolOutput(
                value={"path": path, **value}, images=() if image is None else (image,)
            )
        cut = len(data) > MAX_READ_BYTES
        try:
            text = data[:MAX_READ_BYTES].decode()
        except UnicodeDecodeError:
            encoded = base64.b64encode(data[:4_096]).decode()
            return ToolOutput(
                value={"path": path, "size": len(data), "binary": True, "head_base64": encoded}
            )
        return ToolOutput(value={"path": path, "text": text, "cut": cut})


def sandbox_tools(timeout_s: float, *, cpu_second_usd: Decimal = Decimal(0)) -> list[BaseTool]:
    """The sandbox tools; `timeout_s`: a call's time, its sandbox's wall-time limit and the
    restore of its workspace included; `cpu_second_usd`: the price of a CPU second."""
    return [
        RunCodeTool(timeout_s, cpu_second_usd),
        RunShellTool(timeout_s, cpu_second_usd),
        WorkspaceFilesTool(),
    ]
