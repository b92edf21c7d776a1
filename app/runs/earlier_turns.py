"""What a reader's view must know before it shows a conversation turn's chain: the tool steps
of the turns before it, which that chain's first prompt repeats as the conversation so far."""

from sqlalchemy.ext.asyncio import AsyncConnection

from app.resources.conversations.store import ConversationRepository
from app.security.visibility import ReaderView
from app.storage.records import TaskRecord
from app.storage.tasks import TaskRepository


def repeats_earlier_turns(task: TaskRecord) -> bool:
    """Whether the task's prompts may repeat the steps of other tasks: it is a conversation's
    turn, or the replay or fork of a task that may be one."""
    return (
        task.conversation_id is not None
        or task.replayed_from is not None
        or task.forked_from is not None
    )


async def learn_earlier_turns(
    connection: AsyncConnection, view: ReaderView, task: TaskRecord | None
) -> None:
    """Teaches `view` the steps of the turns before `task`'s in its conversation (for a replay
    or a fork, before its recorded task's: it starts from the same history), so that it shows
    their withheld content in the prompts of `task`'s chain as it shows them in theirs. Reads
    nothing for a reader who sees everything or a task of no conversation."""
    if view.full_access:
        return
    tasks = None
    while task is not None and (source := task.replayed_from or task.forked_from) is not None:
        tasks = tasks or TaskRepository(connection, task.tenant_id)
        task = await tasks.get(source)
    if task is None or task.conversation_id is None or task.turn is None:
        return
    turns = await ConversationRepository(connection, task.tenant_id).history(task.conversation_id)
    for turn in turns:
        if turn.turn < task.turn:
            for step in turn.steps:
                view.learn_earlier(step)
