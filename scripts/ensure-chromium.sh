#!/usr/bin/env bash
# Browser tests drive Debian's Chromium through playwright; never a browser playwright downloads.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "chromium is missing: install Debian's package (sudo apt-get install chromium)" >&2
  exit 1
fi
echo "installing Debian's chromium for the browser tests..."
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
