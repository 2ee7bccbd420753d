#!/bin/sh
# Installs the Debian packages named on the command line that are missing.
# As root it runs apt-get; otherwise it prints the command and fails, so a
# build never starts half-equipped.
set -eu
missing=""
for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0
cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends$missing"
if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    echo "kernbench: this set-up needs a Debian or Ubuntu system (apt-get); install:$missing" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "kernbench: missing packages:$missing" >&2
    echo "kernbench: run as root:  $cmd" >&2
    exit 1
fi
echo "kernbench: installing$missing" >&2
sh -c "$cmd"
