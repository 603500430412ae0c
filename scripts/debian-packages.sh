#!/usr/bin/env bash
# The Debian packages pagedctx's tests and extras use, installed when missing (README, .ci/run).
# As root it runs apt-get itself; as another user it asks sudo. Nothing is installed that is there.
# `debian-packages.sh python3-venv` installs only the packages named. Off Debian it says what to
# install and ends well (the tests needing a missing program skip, and say so).
#   python3-venv             the virtual environments of the README's commands
#   bubblewrap               the sandbox a contract's tests run in (evidence/sandbox.py)
#   wordnet-base             WordNet 3.0's database files: recall across wordings (dialogue tests)
#   redis-server             the Redis store's tests start their own servers (no system service)
#   chromium                 the headless test of `pagedctx view`
#   gcc g++ cmake python3-dev  the verdict attack kit's extension module, and the [cpu] extra's
#                            llama-cpp-python, which PyPI ships as source only
set -euo pipefail
wanted=(python3-venv bubblewrap wordnet-base redis-server chromium gcc g++ cmake python3-dev)
[ $# -gt 0 ] && wanted=("$@")
if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
  echo "not a Debian system: install the equivalents of ${wanted[*]} yourself" >&2
  exit 0
fi
missing=()
for package in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "debian packages: all ${#wanted[@]} installed"
  exit 0
fi
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "debian packages missing (${missing[*]}): run this as root" >&2; exit 1; }
  as_root=(sudo)
fi
echo "debian packages: installing ${missing[*]}"
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
