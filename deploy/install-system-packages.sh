#!/usr/bin/env bash
# Installs the Debian packages screenshot-service needs, and only those missing.
# Used by `make run`, `make test` and the Dockerfile, so all three install the same set.
# Quick when everything is present: one dpkg-query, no apt-get.
set -euo pipefail

PACKAGES=(
  chromium
  ffmpeg
  libvips42
  redis-server
  fonts-liberation
  fonts-noto-color-emoji
  fonts-noto-cjk
  webext-ublock-origin-chromium
  tinyproxy
  poppler-utils
  tzdata
  libnss3-tools
)

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
# tinyproxy's package starts a system-wide daemon; the tests start their own instances.
if command -v systemctl >/dev/null && systemctl is-active --quiet tinyproxy 2>/dev/null; then
  $SUDO systemctl disable --now tinyproxy >/dev/null 2>&1 || true
fi
