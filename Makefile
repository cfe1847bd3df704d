# Sluice build and test entry points. `make run` and `make test` are the two
# commands the README starts with; .ci/run calls `make test`.
#
# The Go binary embeds the browser UI from frontend/dist (frontend/embed.go),
# which is built, not committed: every target that runs the go command
# builds the frontend first (npm ci when package-lock.json changed, then
# npm run build when a source changed).
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
export CGO_ENABLED ?= 0

BIN        := build/bin/sluice
DESKTOP    := build/bin/sluice-desktop
# The desktop window needs WebKitGTK: webkit2gtk-4.0 (Debian 12's
# libwebkit2gtk-4.0-dev), with webkit2_40 when it is 2.40 or newer, so that
# POST bodies and methods reach Go through the asset server (without a
# webkit2_* tag Wails sees every request as a body-less GET); webkit2_41
# where only webkit2gtk-4.1 is installed.
DESKTOP_WEBKIT := $(shell if pkg-config --atleast-version=2.40 webkit2gtk-4.0 2>/dev/null; then echo ,webkit2_40; elif pkg-config --exists webkit2gtk-4.1 2>/dev/null; then echo ,webkit2_41; fi)
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -s -w -X github.com/sluicehq/sluice/app.Version=$(VERSION)
SPECTRUM   := .cache/npm/node_modules/csv-spectrum
FUZZTIME   ?= 20s

FRONTEND_SRC := $(shell find frontend/src -type f 2>/dev/null) frontend/index.html frontend/vite.config.ts frontend/tsconfig.json frontend/package.json
NODE_MODULES := frontend/node_modules/.package-lock.json
DIST         := frontend/dist/index.html

.PHONY: build desktop desktop-smoke run demo test vet fuzz bench bench-ui e2e e2e-fixture clean frontend frontend-test

build: frontend ## the headless binary with the UI embedded, no cgo
	go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) .

desktop: frontend ## the desktop app (Wails window; needs cgo, GTK 3 and WebKitGTK) in build/bin/sluice-desktop
	CGO_ENABLED=1 go build -tags 'desktop,production$(DESKTOP_WEBKIT)' -trimpath -ldflags '$(LDFLAGS)' -o $(DESKTOP) .

desktop-smoke: desktop ## the desktop window under Xvfb: it loads, talks to Go, takes a drop; screenshot in build/artifacts/
	./build/desktop-smoke.sh $(DESKTOP)

run: build ## the server with the UI on ./sluice-data; open the sign-in link it prints
	$(BIN) --serve --data ./sluice-data

demo: build ## the CLI at work on the sample file (data in ./sluice-data)
	SLUICE=$(BIN) ./examples/demo.sh

$(NODE_MODULES): frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund
	@touch $@

$(DIST): $(NODE_MODULES) $(FRONTEND_SRC)
	cd frontend && npm run build

frontend: $(DIST) ## the browser UI, built into frontend/dist

frontend-test: $(NODE_MODULES) ## the frontend's unit tests (Vitest)
	cd frontend && npm test

vet: frontend
	@test -z "$$(gofmt -l app engine storage adapters build frontend/*.go frontend/e2e/fixture main.go)" || { gofmt -l app engine storage adapters build frontend/*.go frontend/e2e/fixture main.go; echo 'gofmt needed'; exit 1; }
	go vet ./...

e2e-fixture: frontend
	go build -o build/bin/e2e-fixture ./frontend/e2e/fixture

e2e: e2e-fixture $(NODE_MODULES) ## the browser tests: Playwright drives Debian's chromium through the UI of a real server
	cd frontend && npm run e2e

bench-ui: e2e-fixture $(NODE_MODULES) ## the UI targets in Chromium (see docs/BENCHMARKS.md)
	cd frontend && npm run bench-ui

$(SPECTRUM):
	npm install --silent --no-audit --no-fund --prefix .cache/npm csv-spectrum@1 >/dev/null

test: vet frontend-test $(SPECTRUM) ## every test (the browser tests need chromium), the csv-spectrum cases, a short fuzz run, the desktop smoke test
	CSV_SPECTRUM_DIR=$(CURDIR)/$(SPECTRUM) go test -count=1 -timeout 30m ./...
	$(MAKE) e2e
	$(MAKE) fuzz
	@if [ -n "$$SLUICE_CI" ] || pkg-config --exists gtk+-3.0 webkit2gtk-4.0 2>/dev/null || pkg-config --exists gtk+-3.0 webkit2gtk-4.1 2>/dev/null; then \
		$(MAKE) desktop-smoke; \
	else \
		echo "desktop smoke test skipped: no GTK 3 / WebKitGTK development files (Debian: apt-get install libgtk-3-dev libwebkit2gtk-4.0-dev xvfb xauth imagemagick)"; \
	fi

fuzz:
	go test -run '^$$' -fuzz '^FuzzCSVReader$$' -fuzztime $(FUZZTIME) ./engine/tabular/

bench: build ## the performance targets (see docs/BENCHMARKS.md)
	$(BIN) bench

clean:
	rm -rf build/bin .cache sluice-data frontend/dist frontend/node_modules
