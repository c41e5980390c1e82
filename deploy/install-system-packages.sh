#!/usr/bin/env bash
# Installs the Debian packages screenshot-service needs, and only those missing.
# Used by `make run`, `make test` and the Dockerfile, so all three install the same set.
# Quick when everything is present: one dpkg-query, no apt-get.
#
#   deploy/install-system-packages.sh          what `make run` and `make test` need (the tests' tools too)
#   deploy/install-system-packages.sh --image  what the container image runs with (no test tools, no npm)
#   deploy/install-system-packages.sh --build  what the image's build stage needs besides (python3-venv, npm)
#   deploy/install-system-packages.sh --image-test  what `make image-test` builds and runs the image with
set -euo pipefail

mode=${1:-}
case "$mode" in
  ""|--image|--build|--image-test) ;;
  *) echo "usage: $0 [--image|--build|--image-test]" >&2; exit 2 ;;
esac

# What the service runs on, everywhere.
PACKAGES=(
  chromium-headless-shell
  ffmpeg
  libvips42
  redis-server
  fonts-liberation
  fonts-noto-color-emoji
  fonts-noto-cjk
  webext-ublock-origin-chromium
  tzdata
  ghostscript
  libnss3-tools
  ca-certificates
)
# npm installs the pinned rule set of block_cookie_banners (deploy/npm). Debian's package, unless an npm
# is already there (NodeSource's nodejs ships its own and conflicts with Debian's npm package).
if [[ "$mode" != "--image" ]] && ! command -v npm >/dev/null; then
  PACKAGES+=(npm)
fi
if [[ "$mode" == "--image-test" ]]; then
  # Podman (runc where crun cannot run: cgroups in hybrid mode) and mmdebstrap for the image's base.
  PACKAGES=(podman runc uidmap mmdebstrap ca-certificates)
elif [[ "$mode" == "--build" ]]; then
  # The image's build stage: the virtual environment (every dependency is a wheel, their debugging symbols
  # stripped with binutils' strip) and the consent rules (npm ci); nothing of it but its results reaches the
  # final image.
  PACKAGES=(python3 python3-venv ca-certificates npm binutils)
elif [[ "$mode" == "--image" ]]; then
  # The image brings its own Python (Debian bookworm's 3.11) and an init that reaps Chromium's zombies.
  PACKAGES+=(python3 tini)
else
  # Only the tests use these: an upstream proxy, PDF page rendering and checks, Redis Sentinel (the failover test) and
  # `ip` (the multi-host test's network namespaces).
  # python3-venv: the lock is resolved under Debian's own Python too (tests/unit/test_lock.py).
  PACKAGES+=(tinyproxy poppler-utils qpdf redis-sentinel iproute2 python3-venv)
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "Installing Debian packages: ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then
    SUDO="sudo"
  else
    echo "error: missing packages (${missing[*]}) and not root; install them with apt-get as root" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
if [[ "$mode" == "--image" || "$mode" == "--build" ]]; then
  apt-get clean
  rm -rf /var/lib/apt/lists/*
fi
# tinyproxy's package starts a system-wide daemon; the tests start their own instances.
if command -v systemctl >/dev/null && systemctl is-active --quiet tinyproxy 2>/dev/null; then
  $SUDO systemctl disable --now tinyproxy >/dev/null 2>&1 || true
fi
