#!/usr/bin/env bash
# The README's Install steps, as a new user runs them on linux/amd64, with
# the release directory standing in for the download page:
#   install.sh RELEASE_DIR VERSION
set -euo pipefail
dist=$1 V=$2 P=linux_amd64
cd "$(mktemp -d)"
download() { cp "$dist/$1" .; }   # curl -LO .../download/v$V/$1

download "berm_${V}_${P}.tar.gz"
download checksums.txt
sha256sum --ignore-missing -c checksums.txt
tar xzf "berm_${V}_${P}.tar.gz"
mkdir -p bin && install "berm_${V}_${P}/berm" bin/
PATH=$PWD/bin:$PATH
berm version
