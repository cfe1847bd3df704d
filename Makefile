# Sluice build and test entry points. `make run` and `make test` are the two
# commands the README starts with; .ci/run calls `make test`.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
export CGO_ENABLED ?= 0

BIN        := build/bin/sluice
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -s -w -X github.com/sluicehq/sluice/app.Version=$(VERSION)
SPECTRUM   := .cache/npm/node_modules/csv-spectrum
FUZZTIME   ?= 20s

.PHONY: build run test vet fuzz bench clean

build: ## the headless binary, no cgo
	go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) .

run: build ## the CLI at work on the sample file (data in ./sluice-data)
	SLUICE=$(BIN) ./examples/demo.sh

vet:
	@test -z "$$(gofmt -l app engine storage adapters main.go)" || { gofmt -l app engine storage adapters main.go; echo 'gofmt needed'; exit 1; }
	go vet ./...

$(SPECTRUM):
	npm install --silent --no-audit --no-fund --prefix .cache/npm csv-spectrum@1 >/dev/null

test: vet $(SPECTRUM) ## every test, the csv-spectrum cases and a short fuzz run
	CSV_SPECTRUM_DIR=$(CURDIR)/$(SPECTRUM) go test -count=1 -timeout 30m ./...
	$(MAKE) fuzz

fuzz:
	go test -run '^$$' -fuzz '^FuzzCSVReader$$' -fuzztime $(FUZZTIME) ./engine/tabular/

bench: build ## the performance targets (see docs/BENCHMARKS.md)
	$(BIN) bench

clean:
	rm -rf build/bin .cache sluice-data
