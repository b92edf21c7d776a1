"""The one-call strategies: `direct` answers at once; `cot` reasons step by step first, in the
same call, and its reasoning is recorded as a `thinking` step before the answer."""

from app.agents.engine import ReasoningEngine
from app.agents.models import AgentTask
from app.agents.strategies.common import Answer, StrategyAgent, split_reasoning

DIRECT_PROMPT = "Answer the task directly and concisely."

COT_PROMPT = """\
Think the task through step by step before you answer. Write your reasoning first. Then, on \
a line of its own, `Confidence:` and how sure you are of your answer, from 0 to 1. Last, on a \
line of its own, `Answer:` followed by the final answer alone."""


class DirectAgent(StrategyAgent):
    """One call, no tools: the model's reply is the answer."""

    agent_id = "direct"
    strategy = "direct"

    async def solve(self, task: AgentTask, engine: ReasoningEngine) -> Answer:
        messages = self.conversation(task, self.system_prompt(DIRECT_PROMPT))
        reply = await self.call(engine, messages)
        return Answer((reply.content or "").strip(), [reply.step_id])


class ChainOfThoughtAgent(StrategyAgent):
    """One call, no tools, that reasons before it answers: the reasoning becomes a `thinking`
    step under the call, the text after its last `Answer:` line the answer (the whole reply
    when it has none), its `Confidence:` line the answer's confidence."""

    agent_id = "cot"
    strategy = "cot"

    async def solve(self, task: AgentTask, engine: ReasoningEngine) -> Answer:
        messages = self.conversation(task, self.system_prompt(COT_PROMPT))
        reply = await self.call(engine, messages)
        reasoning, answer, confidence = split_reasoning(reply.content or "")
        sources = [reply.step_id]
        if reasoning:
            step = engine.add_thinking(
                reasoning, confidence=confidence, parent_step_id=reply.step_id
            )
            sources.insert(0, step.id)
        return Answer(answer, sources, confidence)
