#!/usr/bin/env bash
# Installs the pinned toolchains that build the Python and JavaScript
# policies (policies/python, policies/js) into the repository:
#   target/toolchains/python   a venv with componentize-py (PyPI), and the
#                              ORAS project's Python client (PyPI `oras`),
#                              which the registry tests push and pull with
#   policies/js/node_modules   ComponentizeJS (npm, from package-lock.json)
# Needs python3 (with venv) and node/npm. The tests that build these
# policies look exactly there (or at $WASMSCHED_COMPONENTIZE_PY and
# $WASMSCHED_COMPONENTIZE_JS).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

COMPONENTIZE_PY_VERSION=0.25.1

venv="$root/target/toolchains/python"
if ! "$venv/bin/componentize-py" --version 2>/dev/null | grep -q " $COMPONENTIZE_PY_VERSION\$"; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "componentize-py==$COMPONENTIZE_PY_VERSION"
fi
"$venv/bin/componentize-py" --version

ORAS_PY_VERSION=0.2.43
if ! "$venv/bin/python" -c "import oras.version as v; assert v.__version__ == '$ORAS_PY_VERSION'" 2>/dev/null; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check "oras==$ORAS_PY_VERSION"
fi

# `npm install` rather than `npm ci`: npm 11 rejects this lock file in
# `ci` over optional per-platform packages it never records; with the lock
# file present, `install` still takes the locked versions.
npm install --prefix "$root/policies/js" --no-audit --no-fund --loglevel=error
"$root/policies/js/node_modules/.bin/componentize-js" --version

# The interpreter components that run policies shipped as source.
"$root/sdk/build-interpreters.sh"
