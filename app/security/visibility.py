"""What a reader may see of a reasoning step, computed from the stored step JSON when served.

Steps are stored once, with everything. SSE, chain reads, step pages and exports all pass each
step through one `ReaderView`: the reader's level decides whether the step is sent whole, as a
summary or not at all, and a whole step has its sensitive fields redacted.

Every step type has its level by one rule (`ReaderView.level`): tool_call and tool_result steps
by their tool; thinking steps by the LLM tool's rules, since a thought is the model's own reply;
synthesis steps by their stored level, since the answer is the task's `result` anyway.

What a reader may not see of a tool's step it does not see elsewhere either: the prompts that
later LLM call steps record show, where they repeat a withheld call or result, what the reader
sees of that step (`app.security.prompts`).
"""

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar
from uuid import UUID

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints

from app.chain import StepType, ToolType, VisibilityLevel
from app.security.prompts import HIDDEN, WithheldContent

REDACTED = "[REDACTED]"
MAX_ENTRIES = 200
# Shorter values ("yes", "1") would mask ordinary words and numbers everywhere.
MIN_REMEMBERED_CHARS = 4

_RANK = {VisibilityLevel.HIDDEN: 0, VisibilityLevel.SUMMARY: 1, VisibilityLevel.FULL: 2}
# The LLM tool (`app.tools.builtin.llm`, which this package may not import): a thinking step is
# its reply, so it is seen as the rules show that tool.
_LLM_TOOL = (ToolType.LLM, "llm")
# Every character outside ASCII whose casefolding holds ASCII letters, or that a
# case-insensitive regular expression matches to one, with those letters: the only ways text
# may hold a sensitive ASCII name without spelling it in ASCII letters of either case.
_ASCII_ALIKE = {
    "\u00df": "ss",  # ß
    "\u0130": "i",  # İ
    "\u0131": "i",  # ı (dotless i; matches "i" case-insensitively)
    "\u0149": "n",  # ŉ
    "\u017f": "s",  # ſ (long s)
    "\u01f0": "j",  # ǰ
    "\u1e96": "h",  # ẖ
    "\u1e97": "t",  # ẗ
    "\u1e98": "w",  # ẘ
    "\u1e99": "y",  # ẙ
    "\u1e9a": "a",  # ẚ
    "\u1e9e": "ss",  # ẞ
    "\u212a": "k",  # Kelvin sign
    "\ufb00": "ff",  # ligatures
    "\ufb01": "fi",
    "\ufb02": "fl",
    "\ufb03": "ffi",
    "\ufb04": "ffl",
    "\ufb05": "st",
    "\ufb06": "st",
}
_PAYLOADS = frozenset({"thinking", "tool_call", "tool_result", "synthesis"})
_TOOL_STEPS = frozenset({StepType.TOOL_CALL, StepType.TOOL_RESULT})
# How JSON may write a character: a string nested in a string is escaped once more per level.
_ENCODED = {
    '"': r'\\*"',
    "\\": r"\\+",
    "/": r"\\*/",
    **{c: rf"(?:{re.escape(c)}|\\+{e})" for c, e in zip("\b\f\n\r\t", "bfnrt", strict=True)},
}
_ESCAPABLE = re.compile(r'["\\/\x00-\x1f]')
# The value of a quoted key written `"name": value` (or 'name', or `=`) in free text.
_KEYED_VALUE = r"""\s*[:=]\s*(?P<value>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s,;{}\[\]"']+)"""

_Names = TypeVar("_Names", bound=Iterable[str])


def _distinct(names: _Names) -> _Names:
    seen: set[str] = set()
    for name in names:
        if name.casefold() in seen:
            raise ValueError(f"{name!r} is listed twice (names are case-insensitive)")
        seen.add(name.casefold())
    return names


Name = Annotated[str, StringConstraints(min_length=1, max_length=128)]
Distinct = AfterValidator(_distinct)


@dataclass(frozen=True, slots=True)
class StepFacts:
    """What the filter needs to know about a stored step without parsing it."""

    type: StepType
    tool_type: ToolType | None  # for tool_call and tool_result steps (the result's tool)
    tool_name: str | None
    level: VisibilityLevel  # stored with the step: the tool's default


class VisibilityRule(BaseModel):
    """Visibility levels by tool name, else by tool type."""

    model_config = ConfigDict(extra="forbid")

    tool_types: dict[ToolType, VisibilityLevel] = Field(default_factory=dict)
    tools: Annotated[dict[Name, VisibilityLevel], Distinct] = Field(
        default_factory=dict, max_length=MAX_ENTRIES
    )

    def level_for(self, facts: StepFacts) -> VisibilityLevel | None:
        """This rule's level for a step's tool; None when it says nothing about that tool."""
        if facts.tool_name is not None and facts.tool_name in self.tools:
            return self.tools[facts.tool_name]
        return None if facts.tool_type is None else self.tool_types.get(facts.tool_type)


class VisibilityPolicy(VisibilityRule):
    """A tenant's visibility settings (stored as JSON on the tenant, edited via
    GET|PUT /tenants/{tid}/visibility): tenant-wide levels, per-role overrides, and field names
    to redact beyond the tools' own."""

    roles: Annotated[dict[Name, VisibilityRule], Distinct] = Field(
        default_factory=dict, max_length=MAX_ENTRIES
    )
    sensitive_fields: Annotated[list[Name], Distinct] = Field(
        default_factory=list, max_length=MAX_ENTRIES
    )


class SummaryVisibility(BaseModel):
    model_config = ConfigDict(extra="forbid")

    level: Literal[VisibilityLevel.SUMMARY] = VisibilityLevel.SUMMARY
    summary: str


class StepSummary(BaseModel):
    """A step as a reader sees it at `summary` level: its place in the chain, no payload."""

    model_config = ConfigDict(extra="forbid")

    id: UUID
    step_number: int
    type: StepType
    timestamp: AwareDatetime
    parent_step_id: UUID | None
    visibility: SummaryVisibility


def _needle(text: str) -> str:
    """A part of `text`, casefolded, that every JSON encoding of it holds verbatim (`\\u`
    escapes aside): its longest run of characters JSON never escapes."""
    return max(_ESCAPABLE.split(text.casefold()), key=len) or '"'


def _masking(values: Iterable[str]) -> re.Pattern[str]:
    """Any of `values`, as it is or JSON-escaped at any depth; longest first, so that a value
    containing another is masked whole."""
    ordered = sorted(values, key=lambda value: (-len(value), value))
    return re.compile(
        "|".join("".join(_ENCODED.get(c) or re.escape(c) for c in v) for v in ordered)
    )


def _json_container(text: str) -> Any:
    """`text` parsed, if it is a JSON object or array; else None."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        parsed = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict | list) else None


class ReaderView:
    """One reader's view of one chain's steps, for one request or stream.

    Feed it every step in chain order: `render` the ones to send and `learn` the others (those
    before a page or a resumed stream), so that the secrets of earlier steps are masked
    wherever later steps repeat them. Never shared between readers or chains.
    """

    def __init__(
        self,
        policy: VisibilityPolicy,
        *,
        roles: frozenset[str],
        full_access: bool,
        sensitive_fields: Iterable[str],
    ) -> None:
        self.full_access = full_access
        self.served = "full" if full_access else "filtered"
        self._policy = policy
        self._role_rules = [policy.roles[role] for role in sorted(roles) if role in policy.roles]
        names = {n.casefold(): n for n in (*sensitive_fields, *policy.sensitive_fields) if n}
        self._names = frozenset(names)
        self._keyed: re.Pattern[str] | None = None
        if names:
            plain = "|".join(re.escape(n) for n in sorted(names.values(), key=len, reverse=True))
            self._keyed = re.compile(rf"(?P<q>[\"'])(?i:{plain})(?P=q){_KEYED_VALUE}")
        # A text needs parsing only if it holds one of these. A key is quoted at any depth of
        # nesting (`"password` is in `\"password\"` too); a bare name would also match
        # `"input_tokens"` for `token`, in every LLM result.
        self._needles: set[str] = set()
        for folded in names:
            needle = _needle(folded)
            self._needles |= {f'"{needle}', f"'{needle}"} if needle == folded else {needle}
        self._name_needles = frozenset(self._needles)
        self._values: set[str] = set()
        self._mask: re.Pattern[str] | None = None  # built from `_values` when first needed
        self._withheld = WithheldContent()

    @property
    def masks_values(self) -> bool:
        """Whether this view has learned values it masks wherever they recur: raw text of
        the run (live output, which a value may reach split across pieces) cannot then be
        shown to it."""
        return bool(self._values)

    @property
    def withholds(self) -> bool:
        """Whether this view has learned of a tool step it does not show whole: the LLM call
        steps after it must then be rendered, since their prompts may repeat it."""
        return bool(self._withheld)

    @property
    def transparent(self) -> bool:
        """Whether this view changes nothing but what the stored levels say: no rules and no
        sensitive fields. A caller may then pass a step stored at `full` without rendering,
        as long as the view `withholds` nothing (a step stored at a lower level is rendered, and
        teaches it what later prompts must not show)."""
        policy = self._policy
        return not (self._needles or self._role_rules or policy.tools or policy.tool_types)

    @property
    def learning_needles(self) -> frozenset[str] | None:
        """What a stored step's JSON text must hold for `learn` to remember anything from it:
        a step that holds none of these strings once its ASCII letters are lowered (and only
        those) teaches this view nothing, so a reader of later steps may skip it. Empty when
        no step can teach this view anything (full access, or no sensitive names); None when
        no such test exists (a sensitive name beyond ASCII) and every step may teach.

        Only a value under a sensitive key (or `"name": value` in free text) is learned. At
        any depth of nesting (JSON in a string escapes quotes, never letters), the step's text
        then holds the name as `_needle` keeps it (`"name`, `'name`) in ASCII letters of
        either case, unless a `\\u` escape or a character of `_ASCII_ALIKE` spells a part of
        it.
        """
        if self.full_access or not self._name_needles:
            return frozenset()
        if not all(needle.isascii() for needle in self._name_needles):
            return None
        letters = set("".join(self._name_needles))
        alike = {char for char, spelt in _ASCII_ALIKE.items() if letters & set(spelt)}
        return frozenset({*self._name_needles, "\\u", *alike})

    def level(self, facts: StepFacts) -> VisibilityLevel:
        """The level this reader sees a step at: the most permissive of its roles' overrides,
        else the tenant's rule (tool name before tool type), else the step's stored level.

        Rules name tools, and every step type has one rule:
        - tool_call and tool_result steps: their tool's (as stored with the step).
        - thinking steps: the LLM tool's (type `llm`, name `llm`), decided here from the step
          type alone, so chains stored before this rule are covered too. A thought is the
          text of the model's reply, which the LLM's own steps carry: a rule hiding or
          summarising those would be void if the thought were shown whole.
        - synthesis steps: none; their stored level. The answer is the task's `result`, which
          every reader of the task gets, so a rule could not withhold it.
        - the steps of a remote agent's task as recorded under its call (its updates as
          thoughts, its answer as synthesis): the call's tool's, as stored with them, since
          they say what the call's own steps say.
        """
        if self.full_access:
            return VisibilityLevel.FULL
        if facts.type is StepType.THINKING and facts.tool_name is None:
            facts = StepFacts(facts.type, *_LLM_TOOL, facts.level)
        elif facts.tool_type is None and facts.tool_name is None:
            return facts.level
        granted = [lvl for rule in self._role_rules if (lvl := rule.level_for(facts)) is not None]
        if granted:
            return max(granted, key=_RANK.__getitem__)
        return self._policy.level_for(facts) or facts.level

    def render(self, step_json: str, facts: StepFacts) -> str | None:
        """The step as this reader may see it, as JSON text; None when hidden from it.

        Returns `step_json` itself when nothing in it needs changing (always, with full
        access). Every step rendered is also learned from, whatever its level.
        """
        if self.full_access:
            return step_json
        level = self.level(facts)
        if level is VisibilityLevel.HIDDEN:
            self.learn(step_json, facts)
            return None
        sensitive = self._needs_parsing(step_json)
        prompt = _is_llm_call(facts) and self._withheld.may_hold(step_json)
        if level is VisibilityLevel.FULL and not sensitive and not prompt:
            return step_json
        step = json.loads(step_json)
        if sensitive:
            self._collect_step(step)
        if level is VisibilityLevel.SUMMARY:
            seen = self._summary_text(step, facts)
            if _withholdable(facts):
                self._withheld.withhold(step, seen)
            return self._summary(step, seen)
        # The envelope (ids, numbers, time, level) is the system's own: never redacted. A step
        # whose text holds no needle holds nothing to redact at any depth either.
        cleaned = {
            key: self._clean(value) if sensitive and key in _PAYLOADS else value
            for key, value in step.items()
        }
        if prompt and isinstance(call := cleaned.get("tool_call"), dict):
            arguments = call.get("arguments")
            if isinstance(arguments, dict):
                shown = self._withheld.arguments(arguments)
                if shown is not arguments:
                    cleaned["tool_call"] = {**call, "arguments": shown}
        visibility = step.get("visibility") or {}
        summary = visibility.get("summary")
        if isinstance(summary, str) and (masked := self._text(summary)) is not summary:
            cleaned["visibility"] = {**visibility, "summary": masked}
        if all(cleaned[key] is step[key] for key in step):
            return step_json
        return json.dumps(cleaned, ensure_ascii=False, separators=(",", ":"))

    def masked(self, text: str) -> str:
        """Free text of the run (a tool's progress message) with the values this reader has
        learned to mask, and keyed sensitive fields, redacted."""
        if self.full_access:
            return text
        return self._text(text)

    def arguments(self, arguments: dict[str, Any], facts: StepFacts) -> dict[str, Any] | None:
        """A call's arguments (outside its step: a call that waits for approval) as this
        reader sees the step: None where it is hidden or only summarised, else redacted as
        the step's payload is."""
        if self.full_access:
            return arguments
        if self.level(facts) is not VisibilityLevel.FULL:
            return None
        self._collect(arguments)
        cleaned: dict[str, Any] = self._clean(arguments)
        return cleaned

    def learn(self, step_json: str, facts: StepFacts) -> None:
        """Remember the sensitive values of a step without rendering it, and its content if
        this view withholds it."""
        if self.full_access:
            return
        level = self.level(facts) if _withholdable(facts) else VisibilityLevel.FULL
        sensitive = self._needs_parsing(step_json)
        if level is VisibilityLevel.FULL and not sensitive:
            return
        step = json.loads(step_json)
        if sensitive:
            self._collect_step(step)
        if level is not VisibilityLevel.FULL:
            shown = self._summary_text(step, facts) if level is VisibilityLevel.SUMMARY else HIDDEN
            self._withheld.withhold(step, shown)

    def learn_earlier(self, step: Mapping[str, Any]) -> None:
        """Remember the content of a decoded step of an earlier chain that this chain's
        prompts repeat (a turn before this one in its conversation), if this view withholds
        it: the prompts show it as they show this chain's own withheld steps."""
        if self.full_access:
            return
        facts = _stored_facts(step)
        if facts is None or not _withholdable(facts):
            return
        level = self.level(facts)
        if level is VisibilityLevel.SUMMARY:
            self._withheld.withhold(step, self._summary_text(dict(step), facts))
        elif level is VisibilityLevel.HIDDEN:
            self._withheld.withhold(step, HIDDEN)

    def _needs_parsing(self, text: str) -> bool:
        if not self._needles:
            return False
        if "\\u" in text:  # may spell a name or a value in disguise
            return True
        folded = text.casefold()
        return any(needle in folded for needle in self._needles)

    def _collect_step(self, step: dict[str, Any]) -> None:
        for name in _PAYLOADS:
            self._collect(step.get(name))
        self._collect((step.get("visibility") or {}).get("summary"))

    def _summary_text(self, step: dict[str, Any], facts: StepFacts) -> str:
        stored = (step.get("visibility") or {}).get("summary")
        return self._text(stored) if isinstance(stored, str) and stored else f"{facts.type} step"

    def _summary(self, step: dict[str, Any], summary: str) -> str:
        fields = ("id", "step_number", "type", "timestamp", "parent_step_id")
        document = {name: step.get(name) for name in fields}
        document["visibility"] = {"level": VisibilityLevel.SUMMARY.value, "summary": summary}
        return json.dumps(document, ensure_ascii=False, separators=(",", ":"))

    def _collect(self, node: Any) -> None:
        """Remember every value under a sensitive key in `node`."""
        if isinstance(node, dict):
            for key, value in node.items():
                if key.casefold() in self._names:
                    self._remember(value)
                else:
                    self._collect(value)
        elif isinstance(node, list):
            for item in node:
                self._collect(item)
        elif isinstance(node, str) and self._needs_parsing(node):
            nested = _json_container(node)
            if nested is not None:
                self._collect(nested)
            elif self._keyed is not None:
                for match in self._keyed.finditer(node):
                    self._remember(_unquoted(match["value"]))

    def _remember(self, value: Any) -> None:
        if isinstance(value, dict | list):
            for item in value.values() if isinstance(value, dict) else value:
                self._remember(item)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            self._remember(str(value))
        elif isinstance(value, str):
            fresh = value != REDACTED and value not in self._values
            if fresh and len(value) >= MIN_REMEMBERED_CHARS:
                self._values.add(value)
                self._needles.add(_needle(value))
                self._mask = None
            if (nested := _json_container(value)) is not None:
                self._remember(nested)

    def _clean(self, node: Any) -> Any:
        """`node` with sensitive keys' values redacted and remembered values masked (in keys
        too); `node` itself when nothing changed."""
        if isinstance(node, str):
            return self._text(node)
        if isinstance(node, list):
            items = [self._clean(item) for item in node]
            return items if any(a is not b for a, b in zip(items, node, strict=True)) else node
        if isinstance(node, dict):
            cleaned = {
                self._text(key): REDACTED if key.casefold() in self._names else self._clean(value)
                for key, value in node.items()
            }
            unchanged = len(cleaned) == len(node) and all(
                key in node and node[key] is value for key, value in cleaned.items()
            )
            return node if unchanged else cleaned
        return node

    def _text(self, text: str) -> str:
        if not self._needs_parsing(text):
            return text
        nested = _json_container(text)
        if nested is not None:
            cleaned = self._clean(nested)
            return text if cleaned is nested else json.dumps(cleaned, ensure_ascii=False)
        redacted, keyed = self._keyed.subn(_redact_keyed, text) if self._keyed else (text, 0)
        if self._mask is None and self._values:
            self._mask = _masking(self._values)
        masked, values = self._mask.subn(REDACTED, redacted) if self._mask else (redacted, 0)
        return masked if keyed or values else text


def _withholdable(facts: StepFacts) -> bool:
    """Whether a step's content may recur in later prompts: a call or result of a tool other
    than the LLM (whose own steps are the prompts and replies)."""
    return facts.type in _TOOL_STEPS and facts.tool_type is not ToolType.LLM


def _stored_facts(step: Mapping[str, Any]) -> StepFacts | None:
    """The facts of a decoded tool step (its payload names its tool); None for any other."""
    payload = step.get("tool_call") or step.get("tool_result")
    visibility = step.get("visibility")
    if not isinstance(payload, Mapping) or not isinstance(visibility, Mapping):
        return None
    try:
        return StepFacts(
            StepType(step["type"]),
            ToolType(payload["tool_type"]),
            payload.get("tool_name"),
            VisibilityLevel(visibility["level"]),
        )
    except (KeyError, ValueError):
        return None


def _is_llm_call(facts: StepFacts) -> bool:
    return facts.type is StepType.TOOL_CALL and facts.tool_type is ToolType.LLM


def _unquoted(value: str) -> str:
    if value.startswith('"'):
        try:
            return str(json.loads(value))
        except ValueError:
            pass
    return value[1:-1] if value[0] in "\"'" else value


def _redact_keyed(match: re.Match[str]) -> str:
    quote = match["value"][0] if match["value"][0] in "\"'" else '"'
    return f"{match.string[match.start() : match.start('value')]}{quote}{REDACTED}{quote}"
