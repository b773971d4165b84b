#!/bin/sh
# Builds the policies the deployment mounts into deploy/policies/.
set -eu
cd "$(dirname "$0")/.."
cargo build --profile policy --target wasm32-wasip2 -p least-allocated -p http-latency
mkdir -p deploy/policies
cp target/wasm32-wasip2/policy/least_allocated.wasm deploy/policies/least-allocated.wasm
cp target/wasm32-wasip2/policy/http_latency.wasm deploy/policies/http-latency.wasm
ls -l deploy/policies/
