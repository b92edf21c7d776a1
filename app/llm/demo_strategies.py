"""How the offline demo model answers the requests of the tool-less strategies (`auto`'s
complexity rubric, a tree search's proposals and scores, a step-by-step answer), read from the
reply format each request's system prompt asks for, as a model reads it.

It stays what it is: it works arithmetic and clock questions out only with its tools, so it
rates them as needing tools (`auto` then runs ReAct, which has them) and, asked to answer them
without tools, says so; anything else it rates simple."""

import json
import re
from collections.abc import Callable

from app.llm.demo_arithmetic import read_arithmetic

_BREADTH = re.compile(r"propose (\d+) different", re.IGNORECASE)
_TOOLS_LISTED = re.compile(r"Tools: ([^.\n]*)\.")
_RESULT = re.compile(r'"expression": "(?P<expression>[^"]*)", "result": (?P<result>[-\d.e+]+)')
_TIME_WORDS = re.compile(r"\b(?:what time|current time|time is it|local time)\b", re.IGNORECASE)
NEEDS_TOOLS = (
    "Working {what} out needs the {tool} tool, which this strategy does not use: run the task "
    "with `kind: react` or `kind: auto`."
)


def strategy_reply(system: str, task: str, steps: str, final: Callable[[str], str]) -> str | None:
    """The reply to a strategy's request (`steps`: the text after the task, a search's path
    so far; `final` shapes an answer as the request asks); None for any other request."""
    need = _tool_need(task)
    if '{"complexity":' in system:
        if need is None:
            return json.dumps({"complexity": 0.2, "reason": "a short reply, no tools needed"})
        what, tool = need
        return json.dumps({"complexity": 0.7, "reason": f"{what} needs the {tool} tool"})
    if '{"thoughts":' in system:
        found = _BREADTH.search(system)
        breadth = int(found.group(1)) if found else 2
        fresh = [thought for thought in _thoughts(need) if thought not in steps]
        return json.dumps({"thoughts": (fresh or _thoughts(need)[-1:])[: max(1, breadth)]})
    if '{"score":' in system:
        # What is judged comes last: a search's newest step, or the answer after the task.
        judged = (steps or task).rstrip().rsplit("\n", 1)[-1]
        promising = "=" in judged or ("tool" in judged and "needs the" not in judged)
        score, reason = (0.7, "it uses a tool's result") if promising else (0.4, "it stays general")
        return json.dumps({"score": score, "reason": reason})
    if "`Answer:`" in system:
        answer = final(_answer(need))
        return f"I read the task and what it asks for.\nConfidence: 0.5\nAnswer: {answer}"
    if steps.startswith("Reasoning steps:"):
        return final(_answer(need))
    return None


def plan_reply(system: str, tool_steps: list[tuple[str, dict[str, object], str]]) -> str | None:
    """The reply to `plan`'s request for a plan: a tool step for each call the task needs
    (`tool_steps`: the tool, its arguments, what it does) of the tools the request lists,
    else one reasoning step; None for any other request."""
    if '{"steps":' not in system:
        return None
    listed = _TOOLS_LISTED.search(system)
    tools = set(re.split(r",\s*", listed.group(1))) if listed else set()
    steps: list[dict[str, object]] = [
        {
            "id": f"step-{index}",
            "description": what,
            "type": "tool",
            "tool": tool,
            "arguments": arguments,
            "estimated_calls": 0,
        }
        for index, (tool, arguments, what) in enumerate(tool_steps, 1)
        if tool in tools
    ]
    if not steps:
        steps = [{"id": "answer", "description": "Say what the task needs", "strategy": "direct"}]
    return json.dumps({"steps": steps})


def synthesis_reply(system: str, steps: str) -> str | None:
    """The reply to `plan`'s request for the answer from its steps' results: the calculator's
    results as sums; None for any other request."""
    if "results of the plan's steps" not in system:
        return None
    sums = []
    for line in steps.splitlines():
        found = _RESULT.search(line)
        if found is not None:
            sums.append(f"{found['expression']} = {found['result']}.")
    return " ".join(sums) or _answer(None)


def _tool_need(task: str) -> tuple[str, str] | None:
    """What in the task the demo model could only work out with a tool, and which tool."""
    for arithmetic in read_arithmetic(task):
        return arithmetic.expression or arithmetic.source, "calculator"
    if _TIME_WORDS.search(task):
        return "the time", "current_time"
    return None


def _thoughts(need: tuple[str, str] | None) -> list[str]:
    if need is None:
        return [
            "Say what the offline demo model can do",
            "Point to configuring a real model",
            "Answer in one sentence",
        ]
    what, tool = need
    return [
        f"Read what the task asks: {what}",
        f"Work {what} out with the {tool} tool",
        "Answer with the result alone",
    ]


def _answer(need: tuple[str, str] | None) -> str:
    if need is None:
        return (
            "I am OmniForge's offline demo model: configure a real model for answers to "
            "anything but arithmetic and the time (see docs/models.md)."
        )
    what, tool = need
    return NEEDS_TOOLS.format(what=what, tool=tool)
