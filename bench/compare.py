"""`scripts/bench compare BASE [PLAN ...] [--quick]`: the same benchmark plans on a base commit
and on the working tree, back to back, and each figure's change.

The base is checked out (detached) under `.bench/compare/<commit>`, and this tree's `bench/`
is copied over its own: both sides are measured by the same benchmark code, and only the
service differs. Both run on this virtualenv (a base whose dependencies differ is measured with
today's). Each plan runs on the base, then on the working tree, then again on the base and the
working tree when `rounds` is 2, so that a drift of the machine shows as a spread rather than as
a change; each figure's change is the median of the head's over the median of the base's."""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from bench.results import RESULTS_ENV

ROOT = Path(__file__).resolve().parent.parent
COMPARE_DIR = ROOT / ".bench" / "compare"
DEFAULT_PLANS = ("service", "tail")
# Changes within this share of the base are reported as noise; larger ones get a verdict only
# when the two sides' ranges do not overlap.
NOISE = 0.05


def checkout(base: str) -> Path:
    """The base commit's tree with this tree's benchmarks copied over its own."""
    commit = _git("rev-parse", "--verify", f"{base}^{{commit}}")
    tree = COMPARE_DIR / commit[:12]
    if not tree.exists():
        COMPARE_DIR.mkdir(parents=True, exist_ok=True)
        _git("worktree", "add", "--detach", str(tree), commit)
    shutil.rmtree(tree / "bench")
    shutil.copytree(ROOT / "bench", tree / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    return tree


def run_plan(tree: Path, plan: str, quick: bool, log: Path) -> list[dict[str, object]]:
    """`python -m bench PLAN` in `tree`; the figures it recorded."""
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as results:
        path = Path(results.name)
    command = [sys.executable, "-m", "bench", plan, *(["--quick"] if quick else [])]
    env = {**os.environ, RESULTS_ENV: str(path), "PYTHONPATH": str(tree)}
    try:
        with log.open("a", encoding="utf-8") as output:
            output.write(f"\n$ ({tree}) {' '.join(command)}\n")
            output.flush()
            done = subprocess.run(command, cwd=tree, env=env, stdout=output, stderr=output)
        if done.returncode != 0:
            raise RuntimeError(f"{plan} failed in {tree} (exit {done.returncode}); see {log}")
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    finally:
        path.unlink(missing_ok=True)


def run(base: str, plans: list[str], quick: bool, rounds: int = 2) -> None:
    tree = checkout(base)
    log = ROOT / ".bench" / "compare" / "last.log"
    log.write_text("", encoding="utf-8")
    print(
        f"\nThe working tree against {base} ({tree.name}): plans {', '.join(plans)}"
        f"{' (quick)' if quick else ''}, {rounds} round(s) each side, alternating; the"
        f" benchmarks' output in {log.relative_to(ROOT)}"
    )
    for plan in plans:
        values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        meta: dict[str, dict[str, object]] = {}
        for _ in range(rounds):
            for side, root in (("base", tree), ("head", ROOT)):
                for figure in run_plan(root, plan, quick, log):
                    name = str(figure["figure"])
                    values[name][side].append(float(figure["value"]))  # type: ignore[arg-type]
                    meta[name] = figure
        print(f"\n  {plan}:")
        for name, sides in values.items():
            unit, better = meta[name]["unit"], meta[name]["better"]
            if not sides["base"] or not sides["head"]:
                print(f"    {name}: only on {'the base' if sides['base'] else 'the head'}")
                continue
            was, now = statistics.median(sides["base"]), statistics.median(sides["head"])
            change = (now - was) / was if was else float("nan")
            improved = change < 0 if better == "lower" else change > 0
            overlap = min(sides["head"]) <= max(sides["base"]) and min(sides["base"]) <= max(
                sides["head"]
            )
            if abs(change) < NOISE:
                verdict = "within noise"
            elif overlap:
                verdict = "within the spread"  # the sides' ranges overlap: no verdict
            else:
                verdict = "better" if improved else "WORSE"
            spread = _spread(sides["base"]) + " → " + _spread(sides["head"])
            print(
                f"    {name:<44} {was:>10.2f} → {now:>10.2f} {unit:<8} {change:+7.1%}  "
                f"{verdict}  ({spread})"
            )


def _spread(values: list[float]) -> str:
    return "–".join(f"{value:.2f}" for value in sorted({min(values), max(values)}))


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip()
