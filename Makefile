# Convenience targets; scripts/test and .ci/run are the sources of truth.

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
STATICCHECK_VERSION := v0.8.2
TOOLS_DIR ?= $(HOME)/.cache/syncd-tools
STATICCHECK := $(TOOLS_DIR)/staticcheck-$(STATICCHECK_VERSION)/staticcheck

.PHONY: run build static test test-race lint vet fmt ci

run: ## serve the embedded todos demo on 127.0.0.1:8787
	go run ./cmd/syncd serve

build: ## build ./bin/syncd
	go build -trimpath -ldflags "$(LDFLAGS)" -o bin/syncd ./cmd/syncd

static: ## build a static binary without cgo
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o bin/syncd ./cmd/syncd

test: ## unit and PostgreSQL-backed tests
	./scripts/test

test-race: ## the same with the race detector (what CI runs)
	RACE=1 ./scripts/test

vet:
	go vet ./...

fmt:
	gofmt -w .

$(STATICCHECK):
	GOBIN=$(dir $@) go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

lint: $(STATICCHECK)
	$(STATICCHECK) ./...

ci: ## everything CI checks
	./.ci/run
