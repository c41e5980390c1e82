# screenshot-service: one image for every role (api, worker, webhooks; `run` for a single container).
#
#   docker build -t screenshot-service .
#   docker run --rm -p 8000:8000 --stop-timeout 320 --security-opt seccomp=deploy/seccomp-chromium.json \
#       screenshot-service run
#                                                            # everything in one container, embedded Redis
#   docker compose -f deploy/docker-compose.yml up --scale worker=4
#
# Chromium runs as the non-root user below with its sandbox on. The sandbox needs user namespaces, which
# Docker's default seccomp profile refuses: run workers with deploy/seccomp-chromium.json (docs/operating.md, Deploying).
# Pinned to a dated Debian 12 image (12.12): a rebuild gets the same base until this line changes.
FROM debian:bookworm-20251229-slim AS build

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The build stage: Python's virtual environment and the consent rules, made with tools (python3-venv, npm and
# Node.js, about 175 MB) that the final image does not carry. Behind a TLS-inspecting proxy, pass its CA bundle
# to pip and npm for this stage only: `--volume /etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt:ro
# --build-arg PIP_CERT=/run/host-ca.crt --build-arg NODE_EXTRA_CA_CERTS=/run/host-ca.crt` (tests/image does).
ARG PIP_CERT
ARG NODE_EXTRA_CA_CERTS
COPY deploy/install-system-packages.sh /tmp/install-system-packages.sh
RUN bash /tmp/install-system-packages.sh --build

# Python dependencies first (pinned by requirements.lock), so a code change does not reinstall them.
WORKDIR /opt/screenshot-service
COPY pyproject.toml requirements.lock README.md ./
RUN python3 -m venv /opt/venv \
    && python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
        > /tmp/dependencies.txt \
    && /opt/venv/bin/pip install --no-cache-dir -c requirements.lock -r /tmp/dependencies.txt \
    && rm /tmp/dependencies.txt
# Wheels' shared objects and Playwright's Node.js carry their debugging symbols (adblock's 48 MB are 4 MB
# without): stripped, as Debian strips its own packages' binaries.
# block_cookie_banners' rules: DuckDuckGo's autoconsent at the version deploy/npm/package-lock.json pins.
COPY deploy/npm/package.json deploy/npm/package-lock.json deploy/npm/
RUN npm ci --prefix deploy/npm --ignore-scripts --no-audit --no-fund --loglevel=error && npm cache clean --force
COPY service service
COPY render render
COPY animate animate
COPY storage storage
# Data no program of the image reads stays out too: Babel's locales but the root and English ones (only courlan
# reads them, to score a URL segment's language, and takes an unknown locale as no evidence) and botocore's models
# of AWS services but S3's and those its credential providers call (STS, SSO, SSO OIDC, Sign-In).
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps -c requirements.lock . \
    && find /opt/venv -type f \( -name '*.so' -o -name '*.so.*' -o -path '*/playwright/driver/node' \) \
        -exec strip --strip-unneeded {} + \
    && /opt/venv/bin/pip uninstall --yes --quiet pip setuptools \
    && packages=$(/opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
    && find "$packages/babel/locale-data" -name '*.dat' ! -name root.dat ! -name en.dat ! -name 'en_*.dat' -delete \
    && find "$packages/botocore/data" -mindepth 1 -maxdepth 1 -type d ! -name s3 ! -name sts ! -name sso \
        ! -name sso-oidc ! -name signin -exec rm -r {} +


FROM debian:bookworm-20251229-slim

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# Files of the system packages that no capture reads, never unpacked (dpkg's path-exclude, as Debian's slim
# images do): documentation but the licences, manual pages, translations; Mesa's GPU drivers and the LLVM and Z3
# they compile shaders with, which ffmpeg's libavdevice brings in through libGL, and Intel's Media SDK encoders that
# ffmpeg's dispatcher (libmfx.so.1, kept) would load for an Intel GPU (Chromium runs with its GPU off, on its own
# SwiftShader, and ffmpeg encodes on the CPU); Chromium's Vulkan validation layer, a debugging aid.
RUN printf '%s\n' 'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright' \
        'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*' 'path-exclude=/usr/share/locale/*' \
        'path-exclude=/usr/lib/*/dri/*' 'path-exclude=/usr/lib/*/libLLVM-*' 'path-exclude=/usr/lib/*/libz3.so*' \
        'path-exclude=/usr/lib/*/libmfxhw64.so*' 'path-exclude=/usr/lib/*/libmfx-tracer.so*' \
        'path-exclude=/usr/lib/*/mfx/*' 'path-exclude=/usr/lib/chromium/libVkLayer_khronos_validation.so' \
        > /etc/dpkg/dpkg.cfg.d/screenshot-service-excludes
# System packages through the same script `make run` and `make test` use (Chromium, fonts for Latin,
# emoji and CJK, ffmpeg, libvips, Redis, the ad lists; plus Python and tini for the image).
COPY deploy/install-system-packages.sh /tmp/install-system-packages.sh
RUN bash /tmp/install-system-packages.sh --image && rm /tmp/install-system-packages.sh

# What the build stage made: the virtual environment (its Python is this image's /usr/bin/python3) and the rules.
WORKDIR /opt/screenshot-service
COPY --from=build /opt/venv /opt/venv
COPY --from=build /opt/screenshot-service/deploy/npm/node_modules deploy/npm/node_modules
RUN /opt/venv/bin/screenshot-service --help > /dev/null

# A non-root user: Chromium keeps its sandbox on (SCREENSHOT_CHROMIUM_SANDBOX=auto turns it off only as root).
# Its group is 10001 too, as the manifests' runAsGroup says (useradd --user-group would pick a system gid).
RUN groupadd --system --gid 10001 screenshot \
    && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /home/screenshot screenshot \
    && install -d -o 10001 -g 10001 /data
USER 10001:10001
ENV PATH=/opt/venv/bin:$PATH \
    HOME=/home/screenshot \
    SCREENSHOT_HOST=0.0.0.0 \
    SCREENSHOT_PORT=8000 \
    SCREENSHOT_DATA_DIR=/data \
    SCREENSHOT_CONSENT_RULES_DIR=/opt/screenshot-service/deploy/npm/node_modules/@duckduckgo/autoconsent \
    SCREENSHOT_LOG_FORMAT=json
VOLUME ["/data"]
EXPOSE 8000

# tini is PID 1: it forwards SIGTERM (graceful shutdown) and reaps the processes Chromium leaves behind.
ENTRYPOINT ["/usr/bin/tini", "--", "screenshot-service"]
CMD ["api"]
# The check adapts to the role it finds: /healthz for the API, a fresh heartbeat for a worker, Redis for
# the webhook deliverer.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["screenshot-service", "healthcheck"]
