#!/usr/bin/env bash
# Installs what the tests need on top of the build dependencies, on Debian 12
# (as root, non-interactive), and the Firefox Profiler's loader (profiler-cli)
# into build/node, where tests/integration looks for it.
set -euo pipefail

cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

bash scripts/install-build-deps.sh
# nginx is the tests' upload peer, started by the tests on loopback: the
# package must not start a system-wide nginx of its own.
made_policy=
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
	chmod +x /usr/sbin/policy-rc.d
	made_policy=1
fi
# debhelper, dpkg-dev, lintian, man-db: scripts/build-deb.sh and
# integration.package; debootstrap (with the archive's keyring) and
# systemd-container (systemd-nspawn): integration.systemd boots the package
# under a real systemd in a container. clang-tidy, cppcheck: the static.*
# tests; clang-14 with its runtime: the libFuzzer targets (scripts/fuzz.sh).
# debuginfod (elfutils' server) and iproute2: integration.debuginfod serves
# debug files from it inside a private network namespace (ip link set lo up).
# sqlite3, xz-utils: Debian's stripped programs that integration.stripped_perf
# profiles beside perf, with python3 and perl (perl-base is always there).
# ceph-mon, ceph-osd, radosgw (Ceph 16.2) and curl: integration.s3 and
# bench/s3.py run a one-node Ceph cluster whose radosgw is a real S3 store
# (tests/integration/fxceph.py); like nginx, none of it starts by itself.
# faketime: integration.s3 runs the agent an hour ahead of the store.
# openjdk-17-jdk-headless: integration.jit_java (javac, java, jcmd).
# golang-go: integration.view reads the pprof export with `go tool pprof`.
# apache2-utils: ab, the bounded HTTP load of integration.whole_stacks's
# Node.js server and integration.reuse_threads's Python one.
apt-get install -y --no-install-recommends \
	libcmocka-dev jq python3 linux-perf elfutils lld g++ ca-certificates clang-format \
	sqlite3 xz-utils apache2-utils \
	openssl nginx-light debuginfod iproute2 \
	ceph-mon ceph-osd radosgw ceph-common curl faketime \
	debhelper dpkg-dev lintian man-db procps \
	debootstrap debian-archive-keyring systemd-container \
	clang-tidy cppcheck clang-14 libclang-rt-14-dev \
	openjdk-17-jdk-headless golang-go
[ -z "$made_policy" ] || rm -f /usr/sbin/policy-rc.d
if ! command -v node >/dev/null 2>&1; then
	apt-get install -y --no-install-recommends nodejs npm
fi

npm_install() {
	npm install --prefix build/node --no-audit --no-fund --loglevel=error "$@"
}

# profiler-cli needs Node.js >= 20 (its client gives up on its daemon under
# Debian 12's Node.js 18). A newer node from npm goes into build/node/node_modules/.bin,
# which the tests put first on profiler-cli's PATH.
bin=build/node/node_modules/.bin
node_major=$(PATH="$bin:$PATH" node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
	npm_install node@22
fi

pcli_version=0.10.0
if [ "$(PATH="$bin:$PATH" "$bin/profiler-cli" --version 2>/dev/null)" != "$pcli_version" ]; then
	npm_install "@firefox-devtools/profiler-cli@$pcli_version"
fi
PATH="$bin:$PATH" "$bin/profiler-cli" --version >/dev/null

# speedscope: integration.view reads the folded export with its importer
# (tests/tools/speedscope_folded.mjs).
ss_version=1.22.2
if [ "$(node -p "require('./build/node/node_modules/speedscope/package.json').version" 2>/dev/null)" != "$ss_version" ]; then
	npm_install "speedscope@$ss_version"
fi
