"""What a model is told of a tool result: one text, shared by the agents that tell it and the
readers that must recognise it in the prompts recorded later."""

import json
from collections.abc import Mapping
from typing import Any


def observation_text(result: Mapping[str, Any]) -> str:
    """A stored tool result (`ToolResultInfo` as JSON) as the model was told it: its value
    (text as it is, anything else as JSON with sorted keys, so a result read back from a store
    that reorders keys tells the same text), or its error."""
    if not result.get("success"):
        return f"Error ({result.get('error_code')}): {result.get('error')}"
    value = result.get("result")
    return (
        value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    )
