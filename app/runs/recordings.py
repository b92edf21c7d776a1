"""The recorded steps a replay or a fork of a task takes from it, copied into the new chain."""

from uuid import UUID, uuid5

from app.chain import ReasoningStep
from app.errors import OmniForgeError
from app.storage.records import TaskRecord
from app.storage.runs import RunStores


class RecordingGone(OmniForgeError):
    """The task a replay or a fork takes its steps from no longer exists (erased, purged)."""


async def recording_of(stores: RunStores, task: TaskRecord) -> list[ReasoningStep] | None:
    """The steps a replay (all of them) or a fork (up to its `fork_step`) of another task
    takes from it, as steps of `task`'s chain; None for any other task."""
    source_id = task.replayed_from or task.forked_from
    if source_id is None:
        return None
    source = await stores.queue.task(source_id)
    if source is None or source.tenant_id != task.tenant_id:
        raise RecordingGone(f"the task it takes its steps from ({source_id}) is gone")
    stored = await stores.streams.chain_steps(source.chain_id)
    if task.fork_step is not None:
        stored = stored[: task.fork_step]
    return copied([ReasoningStep.model_validate_json(step) for step in stored], task.chain_id)


def copied(steps: list[ReasoningStep], chain_id: UUID) -> list[ReasoningStep]:
    """`steps` of another chain as steps of `chain_id`'s: new ids (the same ones each time, so
    a resumed run copies the same), the references between them kept, each naming the step
    it repeats (the first chain's, through copies of copies)."""
    ids = {step.id: uuid5(chain_id, str(step.id)) for step in steps}
    copies = []
    for step in steps:
        copy = step.model_copy(deep=True)
        copy.id = ids[step.id]
        copy.copied_from = step.copied_from or step.id
        if step.parent_step_id is not None:
            copy.parent_step_id = ids.get(step.parent_step_id, step.parent_step_id)
        if copy.synthesis is not None:
            copy.synthesis.sources = [ids.get(source, source) for source in copy.synthesis.sources]
        copies.append(copy)
    return copies
