"""The model list is read from LiteLLM's own YAML, checked up front, and always offers `demo`."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from app.llm import DEMO_MODEL, ModelConfigError, load_model_list
from app.llm.config import DeploymentConfig

PROXY_CONFIG = """\
model_list:
  - model_name: primary
    litellm_params:
      model: openai/gpt-4o-mini
      api_base: https://api.openai.com/v1
      timeout: 30
    model_info:
      id: openai-mini
      input_cost_per_token: 0.00000015
      output_cost_per_token: 0.0000006
    tpm: 100000
  - model_name: backup
    litellm_params:
      model: anthropic/claude-3-haiku-20240307
router_settings:
  routing_strategy: simple-shuffle
  fallbacks: [{primary: [backup]}]
litellm_settings:
  drop_params: true
  set_verbose: false
general_settings:
  master_key: sk-not-ours
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def write_document(tmp_path: Path, document: Any) -> Path:
    return write(tmp_path, yaml.safe_dump(document))


def deployment(name: str, model: str | None = None, **params: Any) -> dict[str, Any]:
    return {"model_name": name, "litellm_params": {"model": model or f"openai/{name}", **params}}


def test_litellm_proxy_config_with_other_sections_loads(tmp_path: Path) -> None:
    model_list = load_model_list(write(tmp_path, PROXY_CONFIG))

    assert model_list.model_names() == ["primary", "backup", DEMO_MODEL]
    primary = model_list.model_list[0]
    assert primary.litellm_model == "openai/gpt-4o-mini"
    assert primary.litellm_params["timeout"] == 30
    assert primary.model_info["id"] == "openai-mini"
    assert primary.model_extra == {"tpm": 100000}
    assert model_list.fallbacks() == {"primary": ["backup"]}


def test_demo_model_is_added_after_the_files_models(tmp_path: Path) -> None:
    model_list = load_model_list(write_document(tmp_path, {"model_list": [deployment("a")]}))

    assert model_list.model_names() == ["a", DEMO_MODEL]
    demo = model_list.model_list[-1]
    assert demo.litellm_model == "omniforge_demo/demo"
    assert demo.model_info["supports_function_calling"] is True


def test_a_demo_model_defined_in_the_file_is_kept_instead(tmp_path: Path) -> None:
    own_demo = deployment(DEMO_MODEL, "openai/gpt-4o-mini")

    model_list = load_model_list(
        write_document(tmp_path, {"model_list": [deployment("a"), own_demo]})
    )

    assert model_list.model_names() == ["a", DEMO_MODEL]
    assert [d.litellm_model for d in model_list.model_list] == [
        "openai/a",
        "openai/gpt-4o-mini",
    ]


def test_no_file_gives_only_the_demo_model() -> None:
    model_list = load_model_list(None)

    assert model_list.model_names() == [DEMO_MODEL]
    assert model_list.fallbacks() == {}
    assert model_list.model_list[0].litellm_model == "omniforge_demo/demo"


def test_deployments_of_one_model_name_form_one_model(tmp_path: Path) -> None:
    document = {"model_list": [deployment("a", "openai/x"), deployment("a", "openai/y")]}

    model_list = load_model_list(write_document(tmp_path, document))

    assert model_list.model_names() == ["a", DEMO_MODEL]
    assert len(model_list.model_list) == 3


def test_fallbacks_are_parsed(tmp_path: Path) -> None:
    document = {
        "model_list": [deployment("a"), deployment("b"), deployment("c")],
        "router_settings": {
            "fallbacks": [{"a": ["b", "c"]}, {"b": ["c", DEMO_MODEL]}, {"c": None}]
        },
    }

    model_list = load_model_list(write_document(tmp_path, document))

    assert model_list.fallbacks() == {"a": ["b", "c"], "b": ["c", DEMO_MODEL], "c": []}


@pytest.mark.parametrize(
    "fallbacks",
    [[{"a": ["ghost"]}], [{"ghost": ["a"]}], [{"a": ["b"]}, {"b": ["a", "ghost"]}]],
    ids=["target", "source", "second-entry"],
)
def test_fallbacks_naming_an_unknown_model_are_refused(
    tmp_path: Path, fallbacks: list[dict[str, list[str]]]
) -> None:
    document = {
        "model_list": [deployment("a"), deployment("b")],
        "router_settings": {"fallbacks": fallbacks},
    }
    path = write_document(tmp_path, document)

    with pytest.raises(ModelConfigError, match="unknown model 'ghost'") as caught:
        load_model_list(path)

    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    "fallbacks",
    [{"a": ["b"]}, ["a"], "a"],
    ids=["mapping", "list-of-names", "string"],
)
def test_malformed_fallbacks_are_refused(tmp_path: Path, fallbacks: Any) -> None:
    document = {
        "model_list": [deployment("a"), deployment("b")],
        "router_settings": {"fallbacks": fallbacks},
    }

    with pytest.raises(ModelConfigError, match="fallbacks"):
        load_model_list(write_document(tmp_path, document))


@pytest.mark.parametrize(
    "litellm_params",
    [{}, {"model": ""}, {"model": None}, {"api_base": "http://x"}],
    ids=["empty", "blank", "null", "other-params-only"],
)
def test_deployment_without_a_litellm_model_is_refused(
    tmp_path: Path, litellm_params: dict[str, Any]
) -> None:
    document = {
        "model_list": [
            deployment("good"),
            {"model_name": "broken", "litellm_params": litellm_params},
        ]
    }
    path = write_document(tmp_path, document)

    with pytest.raises(ModelConfigError, match=r"'broken': litellm_params\.model is required"):
        load_model_list(path)


def test_deployment_without_litellm_params_is_refused(tmp_path: Path) -> None:
    path = write_document(tmp_path, {"model_list": [{"model_name": "broken"}]})

    with pytest.raises(ModelConfigError, match=r"model_list\.0\.litellm_params") as caught:
        load_model_list(path)

    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    "document",
    [{"model_list": []}, {"model_list": None}, {"router_settings": {}}, ["a"], "text", None],
    ids=["empty-list", "null-list", "no-list", "top-level-list", "scalar", "empty-file"],
)
def test_a_file_without_models_is_refused(tmp_path: Path, document: Any) -> None:
    path = write_document(tmp_path, document)

    with pytest.raises(ModelConfigError, match="model_list") as caught:
        load_model_list(path)

    assert str(path) in str(caught.value)


def test_a_missing_file_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"

    with pytest.raises(ModelConfigError, match="cannot read model list") as caught:
        load_model_list(path)

    assert str(path) in str(caught.value)


def test_a_directory_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ModelConfigError, match="cannot read model list") as caught:
        load_model_list(tmp_path)

    assert str(tmp_path) in str(caught.value)


@pytest.mark.parametrize(
    "text",
    ["model_list: [\n", "model_list:\n  - model_name: a\n   bad: indent\n", "a: b: c\n"],
    ids=["unclosed", "indentation", "nested-colon"],
)
def test_invalid_yaml_is_refused_naming_the_file(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)

    with pytest.raises(ModelConfigError, match="cannot read model list") as caught:
        load_model_list(path)

    assert str(path) in str(caught.value)


def test_unset_environment_references_are_listed_by_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMNIFORGE_TEST_KEY_A", raising=False)
    monkeypatch.delenv("OMNIFORGE_TEST_BASE_B", raising=False)
    monkeypatch.setenv("OMNIFORGE_TEST_KEY_B", "set")
    document = {
        "model_list": [
            deployment("a", api_key="os.environ/OMNIFORGE_TEST_KEY_A"),
            deployment(
                "b",
                api_key="os.environ/OMNIFORGE_TEST_KEY_B",
                api_base="os.environ/OMNIFORGE_TEST_BASE_B",
            ),
        ]
    }
    path = write_document(tmp_path, document)

    with pytest.raises(ModelConfigError) as caught:
        load_model_list(path)

    message = str(caught.value)
    assert str(path) in message
    assert message.endswith("a: OMNIFORGE_TEST_KEY_A, b: OMNIFORGE_TEST_BASE_B")
    assert "OMNIFORGE_TEST_KEY_B" not in message


def test_set_environment_references_load_and_are_left_for_litellm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMNIFORGE_TEST_KEY_A", "secret")
    document = {"model_list": [deployment("a", api_key="os.environ/OMNIFORGE_TEST_KEY_A")]}

    model_list = load_model_list(write_document(tmp_path, document))

    assert model_list.model_list[0].litellm_params["api_key"] == "os.environ/OMNIFORGE_TEST_KEY_A"


@pytest.mark.parametrize(
    ("model_info", "expected"),
    [
        ({}, False),
        ({"id": "x", "supports_function_calling": True}, False),
        ({"input_cost_per_token": None, "output_cost_per_token": None}, False),
        ({"input_cost_per_token": 0.000001}, True),
        ({"output_cost_per_token": 0.000002}, True),
        ({"input_cost_per_token": 0, "output_cost_per_token": 0}, True),
    ],
    ids=["none", "other-info", "nulls", "input", "output", "free"],
)
def test_has_custom_price_when_the_model_info_sets_a_price(
    model_info: dict[str, Any], expected: bool
) -> None:
    config = DeploymentConfig(
        model_name="m", litellm_params={"model": "openai/m"}, model_info=model_info
    )

    assert config.has_custom_price is expected


def test_litellm_model_is_the_provider_qualified_model(tmp_path: Path) -> None:
    document = {"model_list": [deployment("fast", "groq/llama-3.1-8b-instant")]}

    model_list = load_model_list(write_document(tmp_path, document))

    assert model_list.model_list[0].litellm_model == "groq/llama-3.1-8b-instant"
    assert model_list.model_list[0].model_name == "fast"
