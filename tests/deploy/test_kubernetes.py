"""deploy/kubernetes/: every manifest valid against the Kubernetes API schemas (strict: an
unknown field is an error), and the settings that make a rolling update drain runs: probes on
/healthz and /readyz, no pod down before its successor is ready, a termination grace longer than
preStop plus the service's shutdown grace, metrics on a port the Service does not expose, and
secrets only by reference."""

import base64
import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from pydantic import SecretStr

from app.config import Settings

MANIFESTS = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
# The oldest minor version still supported upstream when this was written, and the newest.
KUBERNETES_VERSIONS = ["1.33.0", "1.37.0"]


def manifests() -> dict[str, dict[str, Any]]:
    """Every resource by kind (one per file), the kustomization aside."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(MANIFESTS.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        (document,) = yaml.safe_load_all(path.read_text(encoding="utf-8"))
        found[document["kind"]] = document
    return found


def container(resources: dict[str, dict[str, Any]]) -> dict[str, Any]:
    (only,) = resources["Deployment"]["spec"]["template"]["spec"]["containers"]
    result: dict[str, Any] = only
    return result


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_is_valid_against_the_api_schemas(version: str) -> None:
    resources = manifests()
    assert set(resources) >= {"Deployment", "Service", "ConfigMap"}
    for kind, document in resources.items():
        assert kubernetes_validate.validate(document, version, strict=True) is not None, kind


@pytest.mark.parametrize(
    "breakage",
    ["a misspelt field", "a wrong type", "a missing required field"],
)
def test_a_broken_manifest_fails_the_check(breakage: str) -> None:
    deployment = copy.deepcopy(manifests()["Deployment"])
    spec = deployment["spec"]
    if breakage == "a misspelt field":
        probe = spec["template"]["spec"]["containers"][0].pop("livenessProbe")
        spec["template"]["spec"]["containers"][0]["livenesProbe"] = probe
    elif breakage == "a wrong type":
        spec["replicas"] = "two"
    else:
        del spec["selector"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSIONS[-1], strict=True)


def test_the_kustomization_applies_every_manifest() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text(encoding="utf-8"))
    on_disk = {p.name for p in MANIFESTS.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == on_disk


def test_probes_and_a_rolling_update_that_drains_runs() -> None:
    resources = manifests()
    deployment = resources["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    serving = container(resources)
    assert serving["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert serving["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    rolling = deployment["spec"]["strategy"]
    assert rolling["type"] == "RollingUpdate"
    assert rolling["rollingUpdate"]["maxUnavailable"] == 0

    settings = deployed_settings(resources)
    pre_stop_s = serving["lifecycle"]["preStop"]["sleep"]["seconds"]
    # SIGTERM comes after preStop; then runs get shutdown_grace_s, then open streams close.
    assert pod["terminationGracePeriodSeconds"] >= pre_stop_s + settings.shutdown_grace_s + 10
    assert resources["PodDisruptionBudget"]["spec"]["minAvailable"] >= 1


def config_map_settings(resources: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The ConfigMap's OMNIFORGE_* variables as Settings fields; an unknown one fails here."""
    data: dict[str, str] = resources["ConfigMap"]["data"]
    fields = {}
    for variable, value in data.items():
        field = variable.removeprefix("OMNIFORGE_").lower()
        assert variable.startswith("OMNIFORGE_"), variable
        assert field in Settings.model_fields, f"{variable} is no setting"
        fields[field] = value
    return fields


def deployed_settings(resources: dict[str, dict[str, Any]]) -> Settings:
    """The settings the pods start with: the ConfigMap's, and stand-ins for the Secret's."""
    # As text, as the pods' environment gives them.
    config_map: dict[str, Any] = config_map_settings(resources)
    return Settings(
        **config_map,
        jwt_secret=SecretStr("a stand-in for the Secret's jwt-secret"),
        secrets_key=SecretStr(base64.b64encode(bytes(32)).decode()),
    )


def test_metrics_are_served_on_a_port_the_service_does_not_expose() -> None:
    resources = manifests()
    settings = deployed_settings(resources)
    ports = {port["name"]: port["containerPort"] for port in container(resources)["ports"]}
    assert ports["metrics"] == settings.metrics_port
    assert ports["metrics"] != ports["http"]
    exposed = {port["targetPort"] for port in resources["Service"]["spec"]["ports"]}
    assert exposed == {"http"}
    metrics_sources = [
        rule.get("from")
        for rule in resources["NetworkPolicy"]["spec"]["ingress"]
        if any(port["port"] == "metrics" for port in rule["ports"])
    ]
    assert metrics_sources
    assert all(metrics_sources)  # a rule without `from` would admit everyone


def test_secrets_are_referenced_never_written() -> None:
    resources = manifests()
    assert "Secret" not in resources
    environment = container(resources)["env"]
    for variable in environment:
        assert "value" not in variable, variable["name"]
        assert "secretKeyRef" in variable["valueFrom"], variable["name"]
    settings = config_map_settings(resources)
    assert not {"jwt_secret", "secrets_key", "database_url", "redis_url"} & set(settings)


def test_the_pod_runs_as_the_images_non_root_user() -> None:
    resources = manifests()
    pod = resources["Deployment"]["spec"]["template"]["spec"]
    dockerfile = (MANIFESTS.parents[1] / "Dockerfile").read_text(encoding="utf-8")
    assert pod["securityContext"]["runAsNonRoot"] is True
    user = pod["securityContext"]["runAsUser"]
    assert f"USER {user}:" in dockerfile
    assert container(resources)["securityContext"]["allowPrivilegeEscalation"] is False
