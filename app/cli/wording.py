"""How the commands say a count: "1 LLM call", "2 LLM calls", "0 tokens"."""

STRATEGY_LABELS = {
    "complexity_assessed": "complexity",
    "strategy_selected": "strategy",
    "strategy_fallback": "fallback",
    "thought": "thought",
    "thought_scored": "score",
    "path_chosen": "path",
    "plan_created": "plan",
    "plan_step_started": "step started",
    "plan_step_completed": "step done",
    "plan_step_failed": "step failed",
    "plan_revised": "plan revised",
    "plan_completed": "plan done",
}
"""How the commands name a strategy's records (a thought's `event`)."""


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and `noun`, the noun in the plural (`plural`, else `noun` + "s") unless the
    count is one."""
    return f"{count} {noun if count == 1 else (plural or noun + 's')}"
