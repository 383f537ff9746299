#!/usr/bin/env bash
# Makes sure headless Chromium and its WebDriver are installed for the web
# console's browser tests: /usr/bin/chromium and /usr/bin/chromedriver. When
# either is missing, installs Debian's packages as root; otherwise says how.
set -euo pipefail

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "Chromium and chromedriver are needed for the web console's tests (backoff-console/tests/)." >&2
  echo "Install them (Debian/Ubuntu: sudo apt-get install chromium chromium-driver) and run this again." >&2
  exit 1
fi
echo "Installing chromium and chromium-driver from the OS packages..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  echo "chromium and chromium-driver were installed, but /usr/bin/chromium or /usr/bin/chromedriver is still missing." >&2
  exit 1
fi
echo "Chromium $(/usr/bin/chromium --version 2>/dev/null | awk '{print $2}') is installed." >&2
