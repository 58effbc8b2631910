#!/usr/bin/env bash
# Installs what building fxagent needs, on Debian 12 (as root, non-interactive).
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends \
	build-essential cmake pkg-config \
	libelf-dev libdw-dev zlib1g-dev libiberty-dev libyaml-dev \
	libcurl4-openssl-dev libsystemd-dev libssl-dev \
	libyajl-dev libmicrohttpd-dev libdebuginfod-dev libxml2-dev \
	clang libbpf-dev libprotobuf-c-dev protobuf-c-compiler
