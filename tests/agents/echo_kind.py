"""An agent kind as a plugin package would ship it: a `CoTAgent` subclass that answers with
its instructions and the task's input, calling no model."""

from app.agents import AgentTask, CoTAgent, ReasoningEngine


class EchoAgent(CoTAgent):
    agent_id = "echo"

    async def reason(self, task: AgentTask, engine: ReasoningEngine) -> None:
        said = task.input or ""
        engine.add_thinking(f"echoing {len(said)} characters")
        engine.add_synthesis(f"echo: {said}", [])


class NotAnAgent:
    pass
