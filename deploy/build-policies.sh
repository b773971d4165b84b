#!/bin/sh
# Builds the policies the deployment mounts into deploy/policies/, gzipped
# (NAME.wasm.gz): a ConfigMap holds 1 MiB, and a client-side `kubectl
# apply` copies the whole object into an annotation capped at 256 KiB, so
# even that path stays open for policies of a few hundred KB.
set -eu
cd "$(dirname "$0")/.."
cargo build --profile policy --target wasm32-wasip2 -p least-allocated -p http-latency
mkdir -p deploy/policies
gzip -9 -n -c target/wasm32-wasip2/policy/least_allocated.wasm > deploy/policies/least-allocated.wasm.gz
gzip -9 -n -c target/wasm32-wasip2/policy/http_latency.wasm > deploy/policies/http-latency.wasm.gz
ls -l deploy/policies/
