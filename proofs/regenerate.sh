#!/usr/bin/env bash
# Regenerates every certificate in proofs/ from its spec, with the generated schedule attached
# (one whose routing shares links by design where its spec's expect.allow_contention says so);
# a spec whose schedule cannot be attached gets the bounds alone.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
bin=./target/release/collsched
for spec in specs/*.json; do
  name=$(basename "$spec" .json)
  $bin generate "$spec" -o "out/$name.json" > /dev/null 2>&1
  if ! $bin bound "$spec" --certificate "proofs/$name.cert.json" --schedule "out/$name.json" > /dev/null 2>/tmp/regen.err; then
    echo "bounds only for $name: $(tail -1 /tmp/regen.err)"
    $bin bound "$spec" --certificate "proofs/$name.cert.json" > /dev/null
  fi
done
