"""An example OmniForge tool: `word_stats` counts the words, sentences and most frequent words
of a text. Deterministic, so that a test can check exactly what an agent got back."""

import re
from collections import Counter
from typing import Any

from app.chain import ToolType
from app.tools.base import BaseTool
from app.tools.errors import FieldError, InvalidToolArguments
from app.tools.models import ToolCallContext, ToolDefinition, ToolOutput, ToolVisibilityConfig

__all__ = ["WordStatsTool"]

MAX_TEXT_CHARS = 100_000
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
# A sentence ends at . ! or ? followed by a space or the end of the text.
_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)")


class WordStatsTool(BaseTool):
    """Counts in a text: words, distinct words, sentences, and the most frequent words."""

    def __init__(self) -> None:
        self._definition = ToolDefinition(
            name="word_stats",
            type=ToolType.SKILL,
            description=(
                "Counts the words, distinct words and sentences of a text and lists its most "
                "frequent words (case-insensitive). Use it instead of counting by hand."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "text": {"type": "string", "maxLength": MAX_TEXT_CHARS},
                    "top": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": 50,
                        "default": 5,
                        "description": "How many of the most frequent words to list.",
                    },
                },
                "required": ["text"],
                "additionalProperties": False,
            },
            returns_description="words, distinct_words, sentences, and top_words as "
            "[word, count] pairs, most frequent first (ties alphabetically).",
            timeout_s=5,
            visibility=ToolVisibilityConfig(summary_template="{words} words"),
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        text: str = arguments["text"]
        if not text.strip():
            raise InvalidToolArguments("word_stats", [FieldError("text", "is empty")])
        words = [word.casefold() for word in _WORD.findall(text)]
        counts = Counter(words)
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        return ToolOutput(
            {
                "words": len(words),
                "distinct_words": len(counts),
                "sentences": sum(1 for part in _SENTENCE_END.split(text) if part.strip()),
                "top_words": [[word, count] for word, count in ranked[: arguments.get("top", 5)]],
            }
        )
