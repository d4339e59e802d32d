#!/usr/bin/env bash
# Makes sure Debian's Chromium is at /usr/bin/chromium, for the dashboard's
# browser test (test/node/dashboard.test.ts drives it with playwright-core;
# never `npx playwright install`, which downloads a browser and cannot work
# on a machine that reaches only the package registries).
#
# Idempotent: does nothing when /usr/bin/chromium is there. Otherwise it
# installs Debian's `chromium` package, which needs root (CI runs as root)
# or passwordless sudo. It fails loudly, with the reason, when it cannot:
# the test that calls it then fails; it never skips.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
  exit 0
fi

# Two test files call this at once on a machine without Chromium: one apt-get
# at a time (dpkg's lock refuses the second), and the one that waited looks again.
if command -v flock >/dev/null 2>&1; then
  exec 9>"${TMPDIR:-/tmp}/ackbox-ensure-chromium.lock"
  flock 9
  if [ -x "$CHROMIUM" ]; then
    exit 0
  fi
fi

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "ensure-chromium: $CHROMIUM is missing and this user cannot install it (not root, no passwordless sudo)." >&2
  echo "ensure-chromium: install it with: sudo apt-get update && sudo apt-get install -y chromium" >&2
  exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: $CHROMIUM is missing and there is no apt-get here; install Chromium at $CHROMIUM by hand." >&2
  exit 1
fi

echo "ensure-chromium: installing Debian's chromium (apt-get)…" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -q
"${as_root[@]}" apt-get install -y -q chromium

if [ ! -x "$CHROMIUM" ]; then
  echo "ensure-chromium: apt-get finished but $CHROMIUM is still missing." >&2
  exit 1
fi
echo "ensure-chromium: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM installed")" >&2
