"""What the direct backend decides without LiteLLM, decided as LiteLLM decides it: which
models' parameters go unchanged, and which finish reasons pass as they are; and what usage it
reads itself."""

import pytest

from app.llm import backend, direct_backend
from app.llm.litellm_env import map_finish_reason
from app.llm.model_map import knows

# Names LiteLLM's map does not know, some of them named like OpenAI's reasoning models.
UNKNOWN = ["fake-model", "acme-llama-local-8b", "qwen2.5:7b", "my-gpt-5-local", "gpt-6-x"]


@pytest.mark.parametrize("model", UNKNOWN)
def test_a_model_goes_unchanged_exactly_when_litellm_would_send_it_so(model: str) -> None:
    # (a model the map may describe is never served without LiteLLM: see test_pricing.py)
    assert not knows(model)
    assert direct_backend._unchanged(model) == backend._unchanged(model)


@pytest.mark.parametrize("reason", sorted(direct_backend._OPENAI_REASONS))
def test_openais_finish_reasons_pass_as_litellm_passes_them(reason: str) -> None:
    assert map_finish_reason(reason) == reason


@pytest.mark.parametrize(
    ("usage", "counts"),
    [
        (None, (0, 0)),
        ({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}, (10, 5)),
        ({"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": None}, (10, 5)),
        ({"prompt_tokens": 10, "completion_tokens": 5, "completion_tokens_details": {}}, (10, 5)),
        ({"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {"x": 0}}, (10, 5)),
        ({"total_tokens": 15}, (0, 0)),
        # only LiteLLM reads these
        (
            {
                "prompt_tokens": 10,
                "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 4},
            },
            None,
        ),
        ({"prompt_tokens": 10, "completion_tokens": 5, "cache_read_input_tokens": 4}, None),
        ({"prompt_tokens": "10", "completion_tokens": 5}, None),
        ({"prompt_tokens": 10}, None),
        ({"prompt_tokens": True, "completion_tokens": 5}, None),
    ],
)
def test_it_reads_plain_usage_itself_and_leaves_the_rest_to_litellm(
    usage: dict[str, object] | None, counts: tuple[int, int] | None
) -> None:
    assert direct_backend._plain_counts(usage) == counts
