#!/usr/bin/env bash
# Installs what the tests need on top of the build dependencies, on Debian 12
# (as root, non-interactive), and the Firefox Profiler's loader (profiler-cli)
# into build/node, where tests/integration looks for it.
set -euo pipefail

cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

bash scripts/install-build-deps.sh
apt-get install -y --no-install-recommends \
	libcmocka-dev jq python3 linux-perf elfutils lld g++ ca-certificates clang-format \
	openssl nginx
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
