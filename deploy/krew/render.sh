#!/usr/bin/env bash
# Renders krew's manifest for a release:
#   deploy/krew/render.sh VERSION RELEASE_URL HOMEPAGE DIST > wasmsched.yaml
# VERSION without its v (0.4.0); RELEASE_URL where the archives are
# downloaded from; HOMEPAGE the project's page; DIST the folder holding
# kubectl-wasmsched_vVERSION_linux_{amd64,arm64}.tar.gz, each with the
# binary `kubectl-wasmsched` at its root (the wasmsched binary renamed:
# it names itself after its program name).
set -euo pipefail
if [ $# -ne 4 ]; then
    echo "usage: $0 VERSION RELEASE_URL HOMEPAGE DIST" >&2
    exit 2
fi
version=$1 release_url=${2%/} homepage=$3 dist=$4
case $version in
    v*) echo "VERSION is written without its v: ${version#v}" >&2; exit 2 ;;
esac
sum() {
    local archive="$dist/kubectl-wasmsched_v${version}_$1.tar.gz"
    [ -f "$archive" ] || { echo "missing $archive" >&2; exit 1; }
    sha256sum "$archive" | cut -d' ' -f1
}
amd64=$(sum linux_amd64)
arm64=$(sum linux_arm64)
template="$(dirname "$0")/wasmsched.yaml.in"
sed -e "s|\${VERSION}|$version|g" \
    -e "s|\${RELEASE_URL}|$release_url|g" \
    -e "s|\${HOMEPAGE}|$homepage|g" \
    -e "s|\${SHA256_LINUX_AMD64}|$amd64|g" \
    -e "s|\${SHA256_LINUX_ARM64}|$arm64|g" \
    "$template" | grep -v '^# '
