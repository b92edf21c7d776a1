"""The session's Python kernel: one interpreter per live sandbox, started by its agent, keeping
the variables of the code it runs between calls. Standard library only (the sandbox's
packages are importable by the code it runs).

It reads one request per line on the descriptor named by its first argument and answers on
the one named by its second; the code it runs has stdin closed and writes to stdout and
stderr, which the agent streams. An answer: `ok`, the last expression's value (`repr`, cut
short), the error's traceback, and the charts left open (matplotlib figures are saved to the
workspace as PNG files and closed)."""

import ast
import contextlib
import json
import os
import sys
import traceback
from typing import Any

MAX_VALUE_CHARS = 4_000
NAMESPACE: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}


def _figures() -> list[str]:
    """Saves the open matplotlib figures (if the code used it) as PNG files; their names."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return []
    saved: list[str] = []
    for number in pyplot.get_fignums():
        name = f"figure-{number}.png"
        while os.path.exists(name):
            name = f"figure-{number}-{len(saved) + 1}.png"
        pyplot.figure(number).savefig(name, format="png", dpi=100, bbox_inches="tight")
        saved.append(name)
    pyplot.close("all")
    return saved


def execute(code: str) -> dict[str, Any]:
    try:
        tree = ast.parse(code, "<code>", "exec")
    except SyntaxError:
        return {"ok": False, "error": traceback.format_exc(limit=0)}
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body[-1].value)
        tree.body.pop()
    try:
        exec(compile(tree, "<code>", "exec"), NAMESPACE)
        value = eval(compile(last, "<code>", "eval"), NAMESPACE) if last else None
    except BaseException as exc:
        if isinstance(exc, SystemExit | KeyboardInterrupt):
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "figures": _figures()}
        frames = traceback.extract_tb(exc.__traceback__)[1:]  # not this kernel's own frame
        text = "".join(
            [
                "Traceback (most recent call last):\n",
                *traceback.format_list(frames),
                *traceback.format_exception_only(exc),
            ]
        )
        return {"ok": False, "error": text, "figures": _figures()}
    answer: dict[str, Any] = {"ok": True, "figures": _figures()}
    if value is not None:
        shown = repr(value)
        answer["value"] = shown[:MAX_VALUE_CHARS]
        answer["value_cut"] = len(shown) > MAX_VALUE_CHARS
    return answer


def main() -> None:
    requests = os.fdopen(int(sys.argv[1]), "r", encoding="utf-8")
    answers = os.fdopen(int(sys.argv[2]), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for line in requests:
        request = json.loads(line)
        answer = execute(request["code"])
        # The end of this call's output, on each stream: the agent streams up to it.
        for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
            with contextlib.suppress(OSError, ValueError):  # the code closed or replaced it
                stream.flush()
            os.write(fd, request["end"].encode())
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
