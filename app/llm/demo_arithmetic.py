"""Everyday arithmetic in words, read into calculator expressions for the offline demo model.

"square root of 2 times pi" reads as `sqrt(2) * pi`: a function said in words applies to the
number right after it, unless parentheses follow it. "15% of 80" reads as `15 * 80 / 100`,
"80 plus 15%" as `80 * (1 + 15 / 100)`. Only the calculator's own syntax is produced, and
arithmetic that cannot be read is reported as such rather than guessed.
"""

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from app.errors import OmniForgeError

# Functions a number may follow without parentheses ("sqrt 2", "square root of 2"). Any other
# name written right before "(" is taken for a function too, and the calculator judges it.
_PREFIX_FUNCTIONS = frozenset({"sqrt", "cbrt"})
_CONSTANTS = {"pi": "pi", "π": "pi", "e": "e", "tau": "tau"}
_SYMBOLS = {"^": "**", "×": "*", "·": "*", "÷": "/", "−": "-"}

_PERCENT = r"(?:%|\bper\s?cent\b)"
_TOKEN = re.compile(
    # Dates and clock times are not subtractions or ratios.
    r"(?P<date>\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}:\d{2}(?::\d{2})?\b)"
    # "1,000" is a thousand, but "max(1,000)" has two arguments.
    r"|(?P<num>(?<![(,])\d{1,3}(?:,\d{3})+(?![\d,])(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"|(?P<sqrt>\b(?:the\s+)?square\s+root(?:\s+of)?\b|\bsqrt\s+of\b)"
    r"|(?P<cbrt>\b(?:the\s+)?cube\s+root(?:\s+of)?\b)"
    rf"|(?P<pct_of>{_PERCENT}\s*of\b)"
    rf"|(?P<pct>{_PERCENT})"
    r"|(?P<pow>\b(?:raised\s+)?to\s+the\s+power\s+of\b|\braised\s+to\b)"
    r"|(?P<squared>\bsquared\b)|(?P<cubed>\bcubed\b)"
    r"|(?P<mul>\bmultiplied\s+by\b|\btimes\b)|(?P<div>\bdivided\s+by\b)"
    r"|(?P<add>\bplus\b)|(?P<sub>\bminus\b)"
    r"|(?P<op>\*\*|[-+*/^×·÷−])"
    r"|(?P<lp>\()|(?P<rp>\))|(?P<comma>,)"
    r"|(?P<name>[^\W\d]\w*|π)"
    r"|(?P<other>\S)",
    re.IGNORECASE,
)
_SPOKEN_OPERATORS = {"pow": "**", "mul": "*", "div": "/", "add": "+", "sub": "-"}
_LONE_CONSTANT = re.compile(
    r"^\W*(?:(?:what\s+is|what's|calculate|compute|evaluate)\s+)?(?:the\s+value\s+of\s+)?"
    r"(pi|π|tau|e)\W*$",
    re.IGNORECASE,
)
_ADD, _MUL, _UNARY, _POW, _ATOM = 1, 2, 3, 4, 5
# Nesting deeper than anyone writes is not read (and cannot exhaust the stack).
_MAX_DEPTH = 32


@dataclass(frozen=True, slots=True)
class Arithmetic:
    """Arithmetic found in a text: at `position`, its `source` words, and the calculator
    `expression` they mean, or None when they could not be read."""

    position: int
    source: str
    expression: str | None


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # num, const, func, op, pct, pct_of, post, lp, rp, comma, word, other
    text: str  # what the calculator is given for it (for words: the word)
    start: int
    end: int
    spoken: bool = False  # said in words ("plus", "square root of"): surely arithmetic


@dataclass(frozen=True, slots=True)
class _Node:
    text: str
    precedence: int
    operations: int = 0
    percent: str | None = None  # a bare "X%": X, for "Y plus X%"

    def at(self, precedence: int) -> str:
        return self.text if self.precedence >= precedence else f"({self.text})"


class _NoParse(OmniForgeError):
    pass


def read_arithmetic(text: str) -> list[Arithmetic]:
    """Every piece of arithmetic in `text`, in order."""
    if match := _LONE_CONSTANT.match(text):
        name = _CONSTANTS[match.group(1).lower()]
        return [Arithmetic(match.start(1), match.group(1), name)]
    tokens = _tokens(text)
    found: list[Arithmetic] = []
    covered: set[int] = set()
    index = 0
    while index < len(tokens):
        if _may_start(tokens, index):
            parser = _Parser(tokens, index)
            try:
                node = parser.expression()
            except _NoParse:
                node = None
            if node is not None and node.operations > 0:
                first, last = tokens[index], tokens[parser.position - 1]
                found.append(Arithmetic(first.start, text[first.start : last.end], node.text))
                covered.update(range(index, parser.position))
                index = parser.position
                continue
        index += 1
    for index, token in enumerate(tokens):
        if index not in covered and _is_arithmetic(tokens, index):
            found.append(Arithmetic(token.start, text[token.start : token.end], None))
    return sorted(found, key=lambda item: item.position)


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    for match in _TOKEN.finditer(text):
        kind, value = match.lastgroup or "other", match.group(0)
        start, end = match.span()
        if kind == "num":
            tokens.append(_Token("num", _number(value), start, end))
        elif kind in ("sqrt", "cbrt"):
            tokens.append(_Token("func", kind, start, end, spoken=True))
        elif kind in ("pct", "pct_of"):
            tokens.append(_Token(kind, value, start, end, spoken=True))
        elif kind in ("squared", "cubed"):
            exponent = "2" if kind == "squared" else "3"
            tokens.append(_Token("post", exponent, start, end, spoken=True))
        elif kind in _SPOKEN_OPERATORS:
            tokens.append(_Token("op", _SPOKEN_OPERATORS[kind], start, end, spoken=True))
        elif kind == "op":
            tokens.append(_Token("op", _SYMBOLS.get(value, value), start, end))
        elif kind == "date":
            tokens.append(_Token("word", value, start, end))
        elif kind in ("lp", "rp", "comma", "other"):
            tokens.append(_Token(kind, value, start, end))
        else:
            tokens.append(_name(value, start, end, called=text.startswith("(", end)))
    return _times_signs(tokens)


def _number(text: str) -> str:
    """The calculator's spelling: no leading zeros (a syntax error there), `0.5` for `.5`."""
    whole, dot, fraction = text.replace(",", "").partition(".")
    return f"{int(whole or '0')}{dot}{fraction}"


def _name(word: str, start: int, end: int, *, called: bool) -> _Token:
    lower = word.lower()
    if lower in _CONSTANTS:
        return _Token("const", _CONSTANTS[lower], start, end)
    if lower in _PREFIX_FUNCTIONS or called:
        return _Token("func", lower, start, end)
    return _Token("word", word, start, end)


def _times_signs(tokens: list[_Token]) -> list[_Token]:
    """`3 x 4` is a multiplication; any other `x` is a word."""
    result = list(tokens)
    for index in range(1, len(tokens) - 1):
        token = tokens[index]
        if (
            token.kind == "word"
            and token.text.lower() == "x"
            and tokens[index - 1].kind in ("num", "rp")
            and tokens[index + 1].kind in ("num", "lp", "const")
        ):
            result[index] = _Token("op", "*", token.start, token.end, spoken=True)
    return result


def _glued_to_word(tokens: list[_Token], index: int) -> bool:
    """Part of a word such as `UTC+2`, `COVID-19` or `Europe/Paris`, not arithmetic."""
    token = tokens[index]
    before = tokens[index - 1] if index > 0 else None
    after = tokens[index + 1] if index + 1 < len(tokens) else None
    return (before is not None and before.kind == "word" and before.end == token.start) or (
        after is not None and after.kind == "word" and after.start == token.end
    )


def _may_start(tokens: list[_Token], index: int) -> bool:
    token = tokens[index]
    if token.kind in ("num", "const", "func", "lp"):
        return True
    return token.kind == "op" and token.text == "-" and not _glued_to_word(tokens, index)


def _is_arithmetic(tokens: list[_Token], index: int) -> bool:
    """An unread token that shows the text asked for arithmetic: a spoken operator or
    function, or an operator beside a number that is not part of a word."""
    token = tokens[index]
    if token.spoken:
        return True
    if token.kind != "op" or _glued_to_word(tokens, index):
        return False
    neighbours = tokens[max(index - 1, 0) : index + 2]
    return any(neighbour.kind == "num" for neighbour in neighbours)


class _Parser:
    """Recursive descent with Python's precedences, so the rendering means what was read.
    A trailing operator with nothing readable after it is left out of the expression."""

    def __init__(self, tokens: list[_Token], position: int) -> None:
        self.tokens = tokens
        self.position = position
        self._depth = 0

    @contextmanager
    def _nested(self) -> Iterator[None]:
        if self._depth >= _MAX_DEPTH:
            raise _NoParse
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    def expression(self) -> _Node:
        left = self._term()
        while (operator := self._operator("+", "-")) is not None:
            saved = self.position
            self.position += 1
            try:
                right = self._term()
            except _NoParse:
                self.position = saved
                break
            operations = left.operations + right.operations + 1
            if right.percent is not None:  # "80 plus 15%": 15 % of 80 added
                text = f"{left.at(_MUL)} * (1 {operator} {right.percent} / 100)"
                left = _Node(text, _MUL, operations)
            else:
                left = _Node(f"{left.text} {operator} {right.at(_MUL)}", _ADD, operations)
        return left

    def _term(self) -> _Node:
        left = self._percent()
        while (operator := self._multiplication()) is not None:
            saved = self.position
            if operator != "":
                self.position += 1
            try:
                right = self._percent()
            except _NoParse:
                self.position = saved
                break
            text = f"{left.at(_MUL)} {operator or '*'} {right.at(_UNARY)}"
            left = _Node(text, _MUL, left.operations + right.operations + 1)
        return left

    def _multiplication(self) -> str | None:
        """`*`, `/`, `%` (a remainder: `%` right before a number), or "" for a number or
        group that follows directly ("2 pi", "2(3 + 4)")."""
        if (operator := self._operator("*", "/")) is not None:
            return operator
        if self._remainder():
            return "%"
        token = self._peek()
        return "" if token is not None and token.kind in ("const", "func", "lp") else None

    def _remainder(self) -> bool:
        token = self._peek()
        after = self.tokens[self.position + 1] if self.position + 1 < len(self.tokens) else None
        return (
            token is not None
            and token.text == "%"
            and after is not None
            and after.kind in ("num", "const", "func", "lp")
        )

    def _percent(self) -> _Node:
        base = self._unary()
        token = self._peek()
        if token is not None and token.kind == "pct_of":
            self.position += 1
            with self._nested():
                whole = self._percent()
            text = f"{base.at(_MUL)} * {whole.at(_UNARY)} / 100"
            return _Node(text, _MUL, base.operations + whole.operations + 1)
        if token is not None and token.kind == "pct" and not self._remainder():
            self.position += 1
            text = f"{base.at(_MUL)} / 100"
            return _Node(text, _MUL, base.operations + 1, percent=base.at(_UNARY))
        return base

    def _unary(self) -> _Node:
        operator = self._operator("-", "+")
        if operator is None:
            return self._power()
        self.position += 1
        with self._nested():
            operand = self._unary()
        return _Node(f"{operator}{operand.at(_UNARY)}", _UNARY, operand.operations)

    def _power(self) -> _Node:
        base = self._postfix()
        if self._operator("**") is None:
            return base
        saved = self.position
        self.position += 1
        try:
            with self._nested():
                exponent = self._unary()
        except _NoParse:
            self.position = saved
            return base
        text = f"{base.at(_ATOM)} ** {exponent.at(_UNARY)}"
        return _Node(text, _POW, base.operations + exponent.operations + 1)

    def _postfix(self) -> _Node:
        node = self._atom()
        while (token := self._peek()) is not None and token.kind == "post":
            self.position += 1
            node = _Node(f"{node.at(_ATOM)} ** {token.text}", _POW, node.operations + 1)
        return node

    def _atom(self) -> _Node:
        token = self._peek()
        if token is None:
            raise _NoParse
        if token.kind in ("num", "const"):
            self.position += 1
            return _Node(token.text, _ATOM)
        if token.kind == "lp":
            self.position += 1
            with self._nested():
                inner = self.expression()
            self._expect("rp")
            return _Node(f"({inner.text})", _ATOM, inner.operations)
        if token.kind == "func":
            self.position += 1
            return self._call(token.text)
        raise _NoParse

    def _call(self, function: str) -> _Node:
        token = self._peek()
        if token is not None and token.kind == "lp":
            self.position += 1
            with self._nested():
                arguments = [self.expression()]
                while (token := self._peek()) is not None and token.kind == "comma":
                    self.position += 1
                    arguments.append(self.expression())
            self._expect("rp")
            text = f"{function}({', '.join(argument.text for argument in arguments)})"
            return _Node(text, _ATOM, 1 + sum(argument.operations for argument in arguments))
        if function not in _PREFIX_FUNCTIONS:
            raise _NoParse
        # "square root of 2 times pi" is sqrt(2) * pi: the function takes the next number.
        operator = self._operator("-")
        if operator is not None:
            self.position += 1
        with self._nested():
            argument = self._atom()
        sign = operator or ""
        return _Node(f"{function}({sign}{argument.text})", _ATOM, argument.operations + 1)

    def _peek(self) -> _Token | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _operator(self, *symbols: str) -> str | None:
        token = self._peek()
        if token is not None and token.kind == "op" and token.text in symbols:
            return token.text
        return None

    def _expect(self, kind: str) -> None:
        token = self._peek()
        if token is None or token.kind != kind:
            raise _NoParse
        self.position += 1
