"""How the commands say a count: "1 LLM call", "2 LLM calls", "0 tokens"."""


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and `noun`, the noun in the plural (`plural`, else `noun` + "s") unless the
    count is one."""
    return f"{count} {noun if count == 1 else (plural or noun + 's')}"
