"""How the strategies read a model's replies: a step-by-step reply's reasoning, confidence and
answer; a JSON object alone, fenced or amid prose; a score from 0 to 1. Nothing a model can
write breaks them."""

from app.agents.strategies.common import json_object, score_of, split_reasoning


def test_a_step_by_step_reply_splits_at_its_last_answer_line() -> None:
    assert split_reasoning("just 5") == ("", "just 5", None)
    assert split_reasoning("A.\n**Answer:** x\nB.\nAnswer: y") == (
        "A.\n**Answer:** x\nB.",
        "y",
        None,
    )
    assert split_reasoning("r\nConfidence: high\nAnswer: z") == ("r", "z", None)
    assert split_reasoning("r\nconfidence: 0.25\nanswer: z")[2] == 0.25


def test_a_reply_holds_a_json_object_alone_fenced_or_amid_prose_and_nothing_breaks_it() -> None:
    assert json_object('{"score": 0.5}') == {"score": 0.5}
    assert json_object('Here:\n```json\n{"score": 0.5}\n```') == {"score": 0.5}
    assert json_object("no object [1, 2]") is None
    assert json_object("[" * 100_000 + "]" * 100_000) is None  # too deep for the parser
    assert json_object("{" * 100_000 + "}" * 100_000) is None
    assert score_of("0.25") == 0.25
    assert [score_of(v) for v in (True, 1.5, -0.1, float("nan"), "high")] == [None] * 5
