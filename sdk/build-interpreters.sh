#!/usr/bin/env bash
# Builds wasmsched's interpreter components, which run Python and
# JavaScript policies shipped as source (docs/architecture.md, "Policies
# shipped as source"), into target/interpreters/:
#   wasmsched-python.wasm  componentize-py: sdk/python/wasmsched_interpreter.py
#                          and the SDK (sdk/python)
#   wasmsched-js.wasm      ComponentizeJS: sdk/js/wasmsched-interpreter.js and
#                          the SDK (sdk/js)
# both against wit/interpreter/0.2.0 (the policy contract 0.4.0 and the
# `source` import). Needs the toolchains policies/install-toolchains.sh
# installs, which runs this at its end. A component is built again only
# when what it is built from changed (the inputs' sha256 is kept beside
# it): a rebuild is never byte-identical, and every new build is compiled
# again by each scheduler that runs it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/target/interpreters"
mkdir -p "$out"
# One build at a time: test processes that start together wait here for
# the first, then find its components up to date.
exec 9>"$out/.lock"
flock 9

# The sha256 of the files named, and of the toolchain's version.
inputs_of() {
    local version=$1; shift
    { echo "$version"; (cd "$root" && sha256sum "$@"); } | sha256sum | cut -d' ' -f1
}

# build NAME INPUTS-SHA256 COMMAND...: runs COMMAND unless NAME was built
# from the same inputs.
build() {
    local name=$1 sha=$2; shift 2
    local stamp="$out/$name.inputs"
    if [ -f "$out/$name" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$sha" ]; then
        echo "$name: up to date"
        return
    fi
    rm -f "$stamp"
    "$@"
    echo "$sha" > "$stamp"
    echo "$name: built ($(du -h "$out/$name" | cut -f1))"
}

wit=(wit/interpreter/0.2.0/source.wit wit/0.4.0/policy.wit)

py="$root/target/toolchains/python/bin/componentize-py"
py_sha=$(inputs_of "$("$py" --version)" "${wit[@]}" sdk/python/wasmsched_interpreter.py sdk/python/wasmsched_helpers.py)
build wasmsched-python.wasm "$py_sha" \
    "$py" -d "$root/wit/interpreter/0.2.0" -w interpreted-policy componentize \
    -p "$root/sdk/python" wasmsched_interpreter -o "$out/wasmsched-python.wasm"

js="$root/policies/js/node_modules/.bin/componentize-js"
js_sha=$(inputs_of "$("$js" --version)" "${wit[@]}" sdk/js/wasmsched-interpreter.js sdk/js/wasmsched-helpers.js)
build wasmsched-js.wasm "$js_sha" \
    "$js" "$root/sdk/js/wasmsched-interpreter.js" --wit "$root/wit/interpreter/0.2.0" \
    --world-name interpreted-policy --disable http fetch-event -o "$out/wasmsched-js.wasm"
