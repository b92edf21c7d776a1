"""The LLM gateway: one LiteLLM Router over the model list, with fallbacks, usage and cost;
the calls LiteLLM would only relay go over HTTP directly (`app.llm.direct`), and a model list
of such deployments alone is served without LiteLLM at all (`app.llm.direct_backend`), which
is then loaded only for what only it does.

Building it imports no LiteLLM (seconds of CPU): the model list's names, fallbacks and
defaults are known at once, and its backend (`app.llm.backend`: the Router, each
deployment's provider, prices and capabilities; or the direct one) is built in a background
thread by whoever awaits `loaded` first (a service, once it is ready), or by the first
synchronous use."""

import logging
from collections import Counter
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from app.bulkheads import TenantThreads
from app.llm.config import DEMO_MODEL, ModelList
from app.llm.errors import ModelConfigError, UnknownModelError
from app.llm.loading import BackgroundLoad
from app.llm.types import LLMDelta, LLMEstimate, LLMRequest, LLMResponse
from app.llm.wire import needs_litellm

if TYPE_CHECKING:
    from app.llm.backend import LiteLLMBackend
    from app.llm.direct_backend import DirectBackend
    from app.llm.pricing import Deployment

    Backend = LiteLLMBackend | DirectBackend

logger = logging.getLogger(__name__)


class LLMGateway:
    """Calls models by model-list name. Built once at start-up; safe to share across tasks.

    Calls wait for the LiteLLM side to be loaded and its lazily loaded code warmed up by one
    call on the demo model (`loaded`), so that no call shares LiteLLM with the warm-up. The
    look-ups of deployments and of what they support are synchronous: before it is loaded
    they load it (without the warm-up) in the caller's thread, so a service awaits `loaded`
    before it runs anything that makes them."""

    def __init__(
        self,
        model_list: ModelList,
        *,
        default_model: str = DEMO_MODEL,
        request_timeout_s: float = 60.0,
        default_max_tokens: int = 4096,
        openai_sdk: bool = False,
        threads: TenantThreads | None = None,
        direct: bool = True,
        without_litellm: bool = True,
    ) -> None:
        """`threads`: the worker threads a tenant's large prompts are counted in, shared with
        the process's other per-tenant CPU work. `direct`: OpenAI-compatible deployments that
        LiteLLM would only relay are called over HTTP directly (`app.llm.direct`);
        `without_litellm`: a model list of such deployments alone (and the demo model) is
        served without importing LiteLLM until something only it does is asked for
        (`app.llm.direct_backend`)."""
        names = model_list.model_names()
        if default_model not in names:
            raise ModelConfigError(
                f"default model {default_model!r} is not in the model list ({', '.join(names)})"
            )
        self.default_model = default_model
        self.default_max_tokens = default_max_tokens
        self._names = names
        self._fallbacks = model_list.fallbacks()
        entries, ids = _router_entries(model_list)
        threads = threads or TenantThreads()

        def build_litellm() -> "LiteLLMBackend":
            from app.llm.backend import LiteLLMBackend

            return LiteLLMBackend(
                model_list,
                entries,
                ids,
                request_timeout_s=request_timeout_s,
                default_max_tokens=default_max_tokens,
                openai_sdk=openai_sdk,
                threads=threads,
                direct=direct,
            )

        def build() -> "Backend":
            if without_litellm and direct and not openai_sdk:
                from app.llm.direct_backend import DirectBackend, serves_without_litellm

                served = serves_without_litellm(
                    model_list, ids, request_timeout_s=request_timeout_s
                )
                if served is not None:
                    return DirectBackend(
                        model_list,
                        *served,
                        default_max_tokens=default_max_tokens,
                        threads=threads,
                        litellm=self._litellm_ready,
                    )
            return self._litellm.result()

        # LiteLLM imported and the Router built; that, and LiteLLM's lazily loaded code warmed
        # up (what calls through LiteLLM wait for).
        self._litellm = BackgroundLoad(build_litellm, name="llm-litellm-build")
        self._litellm_ready = BackgroundLoad(self._warmed_litellm, name="llm-litellm-load")
        # What the synchronous look-ups need: the backend built.
        self._backend = BackgroundLoad(build, name="llm-gateway-build")
        # That, and LiteLLM warmed up if the backend is LiteLLM's: what calls wait for.
        self._ready = BackgroundLoad(self._warmed, name="llm-gateway-load")

    def load(self) -> None:
        """Builds the backend in the caller's thread, or waits for the build under way (a
        command that lists or calls models); raises what stopped it."""
        self._backend.result()

    async def loaded(self) -> None:
        """Returns once the backend is built (and LiteLLM loaded and warmed up, if the backend
        or the default model is LiteLLM's), in a background thread if need be (the loop goes
        on meanwhile); raises what stopped it."""
        await self._ready.wait()

    @property
    def is_loaded(self) -> bool:
        """Whether `loaded` would return at once."""
        return self._ready.built()

    def load_failure(self) -> BaseException | None:
        """What stopped the backend or LiteLLM loading, once it has."""
        return self._ready.failure() or self._backend.failure() or self._litellm_ready.failure()

    async def aclose(self) -> None:
        """Closes the direct calls' connections (LiteLLM keeps its own until exit)."""
        if self._backend.built():
            await self._backend.result().aclose()

    def direct_models(self) -> list[str]:
        """The models whose calls go over HTTP directly, once loaded."""
        return self._backend.result().direct_models()

    def _warmed(self) -> "Backend":
        try:
            backend = self._backend.result()
        except Exception:
            logger.exception("the LLM gateway could not be loaded")
            raise
        if backend is self._litellm.result_if_built() or self.default_model == DEMO_MODEL:
            # LiteLLM's backend, or the demo model's calls (LiteLLM's) by default: loaded now.
            self._litellm_ready.result()
        return backend

    def _warmed_litellm(self) -> "LiteLLMBackend":
        from app.llm.backend import warm_up

        try:
            backend = self._litellm.result()
            warm_up()
        except Exception:
            logger.exception("LiteLLM could not be loaded")
            raise
        return backend

    def model_names(self) -> list[str]:
        return list(self._names)

    def has_model(self, model: str) -> bool:
        return model in self._names

    def deployments(self, model: str) -> "list[Deployment]":
        if model not in self._names:
            raise UnknownModelError(model, self.model_names())
        return self._backend.result().deployments(model)

    def fallbacks(self, model: str) -> list[str]:
        return self._fallbacks.get(model, [])

    def input_window(self, model: str, fallbacks: list[str] | None = None) -> int | None:
        """The most prompt tokens a call to `model` may send: the smallest window of every
        deployment that may answer it (its fallbacks' too). None when one is not known."""
        names = [model, *(self.fallbacks(model) if fallbacks is None else fallbacks)]
        windows = [d.max_input_tokens for name in names for d in self.deployments(name)]
        if not windows or any(window is None for window in windows):
            return None
        return min(window for window in windows if window is not None)

    def supports_native_tools(self, model: str) -> bool:
        """True when every deployment of the model can take OpenAI-style tools."""
        return all(d.supports_tools for d in self.deployments(model))

    def supports_vision(self, model: str) -> bool:
        """True when every deployment that may answer the model (its fallbacks' too) takes
        images in messages: an image sent to one that does not would fail the call."""
        names = [model, *self.fallbacks(model)]
        return all(d.supports_vision for name in names for d in self.deployments(name))

    def supports_response_schema(self, model: str) -> bool:
        """True when LiteLLM says every deployment that may answer the model (its fallbacks'
        too) takes a JSON Schema `response_format`."""
        self.deployments(model)  # an unknown model is named as such
        return self._backend.result().supports_response_schema([model, *self.fallbacks(model)])

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return await (await self._ready_for(request)).complete(request)

    async def stream(self, request: LLMRequest) -> AsyncIterator[LLMDelta | LLMResponse]:
        """Yields text deltas as they arrive, then the complete `LLMResponse`. Reasoning a
        provider streams apart from the answer (LiteLLM's `reasoning_content`) comes as
        `reasoning` deltas, and in the response's `reasoning`."""
        backend = await self._ready_for(request)
        async for event in backend.stream(request):
            yield event

    async def estimate(
        self, request: LLMRequest, *, added_input_tokens: int = 0, tenant_id: str | None = None
    ) -> LLMEstimate:
        """`added_input_tokens`: what the prompt will hold beyond `request.messages` when the
        call is made (a reply still to come), counted as input. `tenant_id`: whose worker
        threads count a large prompt."""
        backend = await self._ready_for(request)
        return await backend.estimate(
            request, added_input_tokens=added_input_tokens, tenant_id=tenant_id
        )

    async def _ready_for(self, request: LLMRequest) -> "Backend":
        """The LiteLLM side, once loaded and warmed up; an unknown model is refused without
        waiting."""
        if request.model not in self._names:
            raise UnknownModelError(request.model, self.model_names())
        backend = await self._ready.wait()
        if (
            request.tools
            and not self._litellm_ready.built()
            and any(needs_litellm(tool) for tool in request.tools)
        ):
            # A schema regex Python cannot compile is dropped by LiteLLM's code: loaded in
            # its thread, not imported on the loop when the tool is first sent.
            await self._litellm_ready.wait()
        return backend


def _router_entries(model_list: ModelList) -> tuple[list[dict[str, Any]], list[str]]:
    """The Router's `model_list` entries, each with its deployment id, and those ids; needs
    no LiteLLM, so that a duplicate id is a configuration error at once."""
    per_group: Counter[str] = Counter()
    entries: list[dict[str, Any]] = []
    for config in model_list.model_list:
        per_group[config.model_name] += 1
        deployment_id = str(
            config.model_info.get("id") or f"{config.model_name}#{per_group[config.model_name]}"
        )
        entry = config.model_dump()
        entry["model_info"] = {**config.model_info, "id": deployment_id}
        entries.append(entry)
    ids = [e["model_info"]["id"] for e in entries]
    if len(set(ids)) != len(ids):
        raise ModelConfigError(f"deployment ids must be unique: {ids}")
    return entries, ids
