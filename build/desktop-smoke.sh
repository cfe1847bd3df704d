#!/usr/bin/env bash
# Desktop smoke test: starts the desktop window (sluice-desktop) under a
# virtual X server (Xvfb) on a fresh data directory with one job, and lets
# it check itself (SLUICE_DESKTOP_SMOKE, app/desktop_smoke.go): the page
# must load, list the jobs through the in-process API, upload a CSV with a
# POST, survive an HTML drop without navigating away, and turn a dropped
# file into a job, list both new jobs and save an export. A screenshot
# of the screen is saved to
# build/artifacts/desktop-smoke.png. Exit status 0 only when every check
# passed and the window closed cleanly on SIGTERM.
#
# Needs Xvfb and ImageMagick's import (Debian: xvfb imagemagick). Without
# them it says so and exits 0, except with SLUICE_CI set, where it fails.
set -euo pipefail
BIN=${1:-build/bin/sluice-desktop}
OUT=${SLUICE_SMOKE_ARTIFACTS:-build/artifacts}
cd "$(dirname "$0")/.."

missing=()
command -v Xvfb >/dev/null || missing+=(Xvfb)
command -v import >/dev/null || missing+=("import (ImageMagick)")
[ -x "$BIN" ] || missing+=("$BIN (make desktop)")
if [ ${#missing[@]} -gt 0 ]; then
	echo "desktop-smoke: missing ${missing[*]}: the desktop smoke test cannot run" >&2
	if [ -n "${SLUICE_CI:-}" ]; then exit 1; fi
	echo "desktop-smoke: SKIPPED (set SLUICE_CI=1 to make this an error)"
	exit 0
fi

work=$(mktemp -d)
xvfb_pid=""
app_pid=""
cleanup() {
	[ -n "$app_pid" ] && kill "$app_pid" 2>/dev/null || true
	[ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$OUT"
data="$work/data"

# One job to list, stored by the same binary's CLI.
"$BIN" ingest examples/products.csv --data "$data" --sqlite-sync NORMAL >/dev/null

# A free display: Xvfb writes the number it took to fd 3.
exec 3<> "$work/display"
Xvfb -displayfd 3 -screen 0 1280x860x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
xvfb_pid=$!
for _ in $(seq 100); do
	[ -s "$work/display" ] && break
	sleep 0.1
done
display=":$(head -n1 "$work/display")"
[ "$display" != ":" ] || { echo "desktop-smoke: Xvfb did not start" >&2; cat "$work/xvfb.log" >&2; exit 1; }
echo "desktop-smoke: Xvfb on $display"

marker="$work/smoke.json"
DISPLAY=$display SLUICE_DESKTOP_SMOKE=$marker SLUICE_LOG_LEVEL=info \
	"$BIN" --data "$data" --sqlite-sync NORMAL >"$work/app.log" 2>&1 &
app_pid=$!

for _ in $(seq 1200); do
	[ -f "$marker" ] && break
	kill -0 "$app_pid" 2>/dev/null || break
	sleep 0.1
done
import -display "$display" -window root "$OUT/desktop-smoke.png" || echo "desktop-smoke: screenshot failed" >&2
kill -TERM "$app_pid" 2>/dev/null || true
rc=0
wait "$app_pid" || rc=$?
app_pid=""
echo "desktop-smoke: window exited with status $rc"
cp "$work/app.log" "$OUT/desktop-smoke.log"
if [ ! -f "$marker" ]; then
	echo "desktop-smoke: FAILED: the window never finished its checks; its log:" >&2
	cat "$work/app.log" >&2
	exit 1
fi
cp "$marker" "$OUT/desktop-smoke.json"
cat "$marker"
echo
read -r passed checks < <(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(len(m.get("passed") or []), m.get("checks") or 0)' "$marker")
echo "desktop-smoke: screenshot $OUT/desktop-smoke.png, log $OUT/desktop-smoke.log"
if [ "$rc" -ne 0 ]; then
	tail -n 40 "$work/app.log" >&2
	echo "desktop-smoke: $passed passed, $((checks - passed)) failed"
	exit 1
fi
echo "desktop-smoke: $passed passed, 0 failed"
