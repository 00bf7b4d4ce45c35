#!/usr/bin/env bash
# Install the Debian packages listed in tests/apt-packages.txt that are not installed yet.
# Runs as root on CI and developer machines (apt-get works there as it is).
set -euo pipefail
cd "$(dirname "$0")"
wanted=$(grep -v '^\s*#' apt-packages.txt | tr -s ' \n' ' ' || true)
missing=()
for pkg in $wanted; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages for the tests: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
