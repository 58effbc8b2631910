#!/usr/bin/env bash
# Builds the Debian package of this tree: scripts/build-deb.sh OUTDIR
#
# The tree keeps its Debian packaging in packaging/debian, not in debian/: the
# sources (git-tracked files and untracked ones git does not ignore, so no
# build directories) are copied to a temporary directory, packaging/debian
# becomes debian/ there, and `dpkg-buildpackage -b` builds the binary package.
# The .deb, the -dbgsym .ddeb, the .changes and the .buildinfo are moved to
# OUTDIR and the .deb's path is printed (the only line on stdout).
# Needs the build dependencies (scripts/install-build-deps.sh), debhelper and
# dpkg-dev.
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)

# One version: the package's must be the agent's (fxagent --version).
cmake_version=$(sed -n 's/^project(fxagent VERSION \([0-9][0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
deb_version=$(dpkg-parsechangelog -l "$root/packaging/debian/changelog" -S Version)
if [ "${deb_version%%-*}" != "$cmake_version" ]; then
	echo "$0: packaging/debian/changelog says $deb_version, CMakeLists.txt $cmake_version:" \
		"add a changelog entry (dch -v $cmake_version)" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fxagent-deb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
src=$tmp/fxagent-$cmake_version
mkdir "$src"

# An OUTDIR inside the tree (and not ignored by git) is not a source.
case "$out/" in
"$root"/*) skip=${out#"$root"/}/ ;;
*) skip= ;;
esac
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# Tracked files deleted in the work tree are left out.
	git -C "$root" ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do
			if [ -n "$skip" ] && [ "${f#"$skip"}" != "$f" ]; then
				continue
			fi
			if [ -e "$root/$f" ] || [ -L "$root/$f" ]; then
				printf '%s\0' "$f"
			fi
		done |
		tar -C "$root" --null --no-recursion -T - -cf - | tar -C "$src" -xf -
else
	# An unpacked tarball: everything but build directories.
	tar -C "$root" --exclude='./build*' --exclude='./debian' -cf - . | tar -C "$src" -xf -
fi
rm -rf "$src/debian"
cp -a "$root/packaging/debian" "$src/debian"

# The build's chatter goes to stderr: stdout is the .deb's path.
(
	cd "$src"
	export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-parallel=$(nproc)}"
	dpkg-buildpackage -b -us -uc
) >&2

shopt -s nullglob
arts=("$tmp"/*.deb "$tmp"/*.ddeb "$tmp"/*.changes "$tmp"/*.buildinfo)
debs=("$tmp"/fxagent_*.deb)
if [ ${#debs[@]} -ne 1 ]; then
	echo "$0: dpkg-buildpackage made ${#debs[@]} fxagent .deb files in $tmp" >&2
	exit 1
fi
deb=$out/$(basename "${debs[0]}")
mv -f "${arts[@]}" "$out/"
echo "$deb"
