"""What one run has taken in, and which of its calls could carry it out.

A result is `untrusted` when someone other than the run's user wrote it (a web page, another
member's file, an MCP tool's or a remote agent's answer, a tool that declares so) and
`private` when it holds data that is not public (a file's content, an answer behind a tenant
secret, a tool that declares so). Once a run holds both, a call that can send data out of the
service (a tool's `egress`: to a URL it has not fetched yet, or anywhere) waits for a human:
instructions planted in the untrusted part could otherwise make the model send the private
part away. The tenant's approval rules may relax this (`exfiltration: allow`).

The labels of each result are stored with it (`ToolResultInfo.labels`), so a resumed run
knows what it held before it stopped; a conversation's later turn starts with the declared
labels of the tools its earlier turns called. Checking a call costs two attribute reads
while the run holds at most one kind, then one set lookup.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from app.chain.models import DataLabel

if TYPE_CHECKING:  # the approval gate holds a run's flow: no import of the models at run time
    from app.tools.models import ToolDefinition, ToolOutput

UNTRUSTED: DataLabel = "untrusted"
PRIVATE: DataLabel = "private"
# The arguments that let a call to a URL it fetched before carry something new.
_PAYLOAD_ARGUMENTS = ("json", "body", "headers")
# `Egress` values (`app.tools.models`).
_NONE, _URL = "none", "url"


class ExfiltrationMode(StrEnum):
    """What a call that could send data out does once its run holds untrusted and private
    data: wait for a human (`approve`, the default) or go (`allow`)."""

    APPROVE = "approve"
    ALLOW = "allow"


def result_labels(definition: "ToolDefinition", output: "ToolOutput") -> list[DataLabel]:
    """A successful result's labels: its tool's declared ones and those the call found."""
    if not (output.labels or definition.untrusted_output or definition.private_output):
        return []
    labels = set(output.labels)
    if definition.untrusted_output:
        labels.add(UNTRUSTED)
    if definition.private_output:
        labels.add(PRIVATE)
    return sorted(labels)


@dataclass(slots=True)
class DataFlow:
    """One run's labels so far, the URLs its calls went to, and whether a call that could
    carry both out waits (`asks`). The first tool that brought each label is named in the
    reason a waiting call gives."""

    asks: bool = True
    untrusted_from: str | None = None
    private_from: str | None = None
    _sent_to: set[str] = field(default_factory=set)

    def took_in(self, tool: str, labels: Iterable[DataLabel]) -> None:
        """A result of `tool` entered the run's context with `labels`."""
        for label in labels:
            if label == UNTRUSTED and self.untrusted_from is None:
                self.untrusted_from = tool
            elif label == PRIVATE and self.private_from is None:
                self.private_from = tool

    def took_in_history(
        self,
        messages: Iterable[Mapping[str, Any]],
        definition_of: Callable[[str], "ToolDefinition | None"],
    ) -> None:
        """What the earlier turns of its conversation (chat `messages`) brought into a run
        that starts from them: the declared labels of each tool they called, since a history
        keeps no result's own; a tool the run no longer has counts as untrusted."""
        for message in messages:
            for call in message.get("tool_calls") or ():
                function = call.get("function") if isinstance(call, Mapping) else None
                name = function.get("name") if isinstance(function, Mapping) else None
                if not isinstance(name, str):
                    continue
                definition = definition_of(name)
                if definition is None:
                    self.took_in(name, (UNTRUSTED,))
                    continue
                if definition.untrusted_output:
                    self.took_in(name, (UNTRUSTED,))
                if definition.private_output:
                    self.took_in(name, (PRIVATE,))

    def called(self, definition: "ToolDefinition", arguments: Mapping[str, Any]) -> None:
        """A call was made (or replayed): a URL it went to is fetched in this run."""
        if definition.egress == _URL:
            url = arguments.get("url")
            if isinstance(url, str):
                self._sent_to.add(url)

    def waits(self, definition: "ToolDefinition", arguments: Mapping[str, Any]) -> str | None:
        """Why this call waits for a human, or None: it could send the run's private data
        out, and the run has also read untrusted content."""
        if self.untrusted_from is None or self.private_from is None or not self.asks:
            return None
        egress = definition.egress
        if egress == _NONE:
            return None
        if egress == _URL:
            url = arguments.get("url")
            fetched = isinstance(url, str) and url in self._sent_to
            if fetched and not any(name in arguments for name in _PAYLOAD_ARGUMENTS):
                return None  # the same request again carries nothing new
            where = "to a URL this run has not fetched before"
        else:
            where = "out of the service"
        return (
            f"This call could send data {where}, and the run has read untrusted content "
            f"(from {self.untrusted_from}) as well as private data (from {self.private_from}): "
            "instructions in the untrusted content could be sending the private data away. "
            "A human decides (the tenant's approval rules, `exfiltration`)."
        )
