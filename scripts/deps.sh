#!/bin/sh
# deps.sh LIST...: makes sure the Debian packages of the named lists are there.
# As root it installs what is missing with apt-get; otherwise it prints the exact
# apt-get line and fails, so `make demo` and `make check` stay the whole set-up.
set -eu
here=$(dirname "$0")
pkgs=""
for list in "$@"; do
    pkgs="$pkgs $(grep -v '^#' "$here/packages-$list.txt" | tr '\n' ' ')"
done
missing=""
for p in $pkgs; do
    s=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$s" in *"install ok installed"*) ;; *) missing="$missing $p" ;; esac
done
[ -z "$missing" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "deps: not a Debian/Ubuntu system; install the equivalents of:$missing" >&2
    exit 1
fi
if [ "$(id -u)" != 0 ]; then
    echo "deps: missing packages; run: sudo apt-get install -y$missing" >&2
    exit 1
fi
echo "deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends$missing >/dev/null
