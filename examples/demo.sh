#!/usr/bin/env bash
# The CLI at work on the sample file: ingest, process, look, export.
# `make demo` runs it.
set -euo pipefail
SLUICE=${SLUICE:-build/bin/sluice}
DATA=${SLUICE_DATA:-./sluice-data}
export SLUICE_DATA=$DATA
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
step "$SLUICE" pipeline apply examples/pipelines/slow.json
step "$SLUICE" ingest examples/products.csv --pipeline slow --wait
JOB=$("$SLUICE" jobs --json --limit 1 | sed -n 's/^      "id": \([0-9]*\),$/\1/p' | head -1)
step "$SLUICE" job "$JOB"
step "$SLUICE" items "$JOB" --status NOT_FOUND,ERROR,SKIPPED
step "$SLUICE" export "$JOB" --format csv -o -
echo
echo "Data is in $DATA (SQLite, WAL). Try: $SLUICE reprocess $JOB --status NOT_FOUND && $SLUICE worker --drain"
