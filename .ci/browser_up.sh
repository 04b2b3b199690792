#!/usr/bin/env bash
# Debian Chromium (+ driver) for the dashboard's browser tests (tests/test_dashboard_browser.py).
# Idempotent: does nothing when /usr/bin/chromium is already there. Never `playwright install`.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  echo "browser_up: $(/usr/bin/chromium --version 2>/dev/null || echo chromium) already installed"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q chromium chromium-driver
echo "browser_up: $(/usr/bin/chromium --version)"
