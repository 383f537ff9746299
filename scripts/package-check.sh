#!/usr/bin/env bash
# What users get is what we test: packages every crate of the workspace
# (`cargo package`), makes a local registry of the .crate files, and builds
# and tests package-check/, a crate outside the workspace that depends on
# them through that registry only (no path dependency, no [patch]), against
# the real RabbitMQ: the README's consumer, the README's in-memory test, a
# hand-written Classify, and deeply nested headers; on RabbitMQ 3.10 and 4.3
# (RABBIT_BACKOFF_VERSIONS), each started here when it is not running (a 4.x
# node started here is stopped again).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
versions=(${RABBIT_BACKOFF_VERSIONS:-3.10 4.3})
scripts/ensure-broker.sh

target=${CARGO_TARGET_DIR:-$root/target}
# The root package leaves its tests and benches out of what it publishes;
# Cargo says so once per target.
cargo package --workspace --locked --no-verify --allow-dirty 2>&1 >/dev/null \
  | { grep -v -e '^warning: ignoring \(test\|benchmark\)' -e '^ *\(Packaging\|Packaged\|Updating\)' || true; }

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
# Every crate of the workspace, each after those it depends on.
crates=()
for manifest in backoff-core/Cargo.toml backoff-macros/Cargo.toml backoff-runtime/Cargo.toml \
  backoff-dead-letters/Cargo.toml backoff-testing/Cargo.toml backoff-console/Cargo.toml Cargo.toml \
  backoff-cli/Cargo.toml; do
  name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$manifest" | head -n 1)
  crates+=("$target/package/$name-$version.crate")
done

# A registry of its own per run: Cargo caches what it downloaded by the
# registry's address, and a cached .crate of the same version would be stale.
registry="$target/package-registry/$(date +%s%N)"
rm -rf "$target/package-registry"
python3 scripts/local_registry.py "$registry" "${crates[@]}"

cd package-check
# Same versions of the crates.io dependencies as the workspace, so that the
# shared target directory reuses their builds.
cp "$root/Cargo.lock" Cargo.lock
export CARGO_REGISTRIES_PACKAGED_INDEX="file://$registry/index"
export CARGO_TARGET_DIR="$target"
# Nothing sizes the threads' stacks for the deep headers: a service has no
# reason to set this, and the check must not either.
unset RUST_MIN_STACK
for version in "${versions[@]}"; do
  echo "package check on RabbitMQ $version" >&2
  started=""
  if ! "$root/scripts/broker.sh" status "$version" | grep -q ' running '; then
    "$root/scripts/broker.sh" up "$version"
    started=$version
  fi
  (
    eval "$("$root/scripts/broker.sh" env "$version")"
    cargo test --quiet -- --test-threads 2
  )
  if [ -n "$started" ] && [ "$started" != 3.10 ]; then "$root/scripts/broker.sh" down "$started"; fi
done
