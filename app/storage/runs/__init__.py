"""The stores of runs, one per role, each with its own SQL: run writes (`RunWrites`), the queue
and its claims (`TaskQueue`), runner leases (`RunnerLeases`), approvals (`ApprovalWrites`) and
stream reads (`StreamReads`). `RunStores` holds one of each over one database."""

from dataclasses import dataclass

from app.storage.database import Database
from app.storage.notify import Notices
from app.storage.runs.approvals import ApprovalWrites
from app.storage.runs.queue import ConversationBusy, TaskLost, TaskQueue, TooManyUnfinished
from app.storage.runs.rows import Fence, RunWrite
from app.storage.runs.runners import RunnerLease, RunnerLeases
from app.storage.runs.streams import StreamReads
from app.storage.runs.writes import RunWrites


@dataclass(frozen=True, slots=True)
class RunStores:
    """The stores of runs over one database, sharing this process's end of the notices."""

    database: Database
    notices: Notices
    writes: RunWrites
    queue: TaskQueue
    runners: RunnerLeases
    approvals: ApprovalWrites
    streams: StreamReads

    @classmethod
    def of(cls, database: Database, notices: Notices | None = None) -> "RunStores":
        notices = notices or Notices()
        return cls(
            database,
            notices,
            RunWrites(database, notices),
            TaskQueue(database, notices),
            RunnerLeases(database, notices),
            ApprovalWrites(database, notices),
            StreamReads(database, notices),
        )


__all__ = [
    "ApprovalWrites",
    "ConversationBusy",
    "Fence",
    "RunStores",
    "RunWrite",
    "RunWrites",
    "RunnerLease",
    "RunnerLeases",
    "StreamReads",
    "TaskLost",
    "TaskQueue",
    "TooManyUnfinished",
]
