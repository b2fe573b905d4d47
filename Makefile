# Convenience targets; scripts/test and .ci/run are the sources of truth.

# Build metadata stamped into cmd/syncd (its `syncd version`, the
# syncd_build_info metric); each can be overridden: make release VERSION=v1.0.0
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
COMMIT_TIME ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
MODIFIED ?= $(shell test -z "$$(git status --porcelain 2>/dev/null)" && echo false || echo true)
LDFLAGS := -X main.version=$(VERSION) -X main.revision=$(COMMIT) -X main.revisionTime=$(COMMIT_TIME) -X main.treeModified=$(MODIFIED)
# Release binaries drop the symbol table and DWARF (stack traces and pprof
# keep working: they use Go's own pclntab).
RELEASE_LDFLAGS := -s -w $(LDFLAGS)
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64
RELEASE_CMDS ?= syncd syncload
DIST ?= dist
DOCKER_ARCH ?= $(shell go env GOARCH)
DOCKER_IMAGE ?= syncd
SHA256 := $(shell command -v sha256sum >/dev/null 2>&1 && echo sha256sum || echo 'shasum -a 256')
STATICCHECK_VERSION := v0.8.2
TOOLS_DIR ?= $(HOME)/.cache/syncd-tools
STATICCHECK := $(TOOLS_DIR)/staticcheck-$(STATICCHECK_VERSION)/staticcheck

.PHONY: run build static release docker print-ldflags test test-race lint vet fmt ci

run: ## serve the embedded todos demo on 127.0.0.1:8787
	go run ./cmd/syncd serve

build: ## build ./bin/syncd
	go build -trimpath -ldflags "$(LDFLAGS)" -o bin/syncd ./cmd/syncd

static: ## build a static binary without cgo
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o bin/syncd ./cmd/syncd

release: ## static binaries of $(RELEASE_CMDS) for $(RELEASE_PLATFORMS) in $(DIST)/, with $(DIST)/SHA256SUMS
	rm -rf $(DIST) && mkdir -p $(DIST)
	set -e; for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; \
		for c in $(RELEASE_CMDS); do \
			echo "$(DIST)/$$c-$$os-$$arch"; \
			CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags "$(RELEASE_LDFLAGS)" -o $(DIST)/$$c-$$os-$$arch ./cmd/$$c; \
		done; \
	done
	cd $(DIST) && $(SHA256) $$(ls | grep -v SHA256SUMS) > SHA256SUMS
	cat $(DIST)/SHA256SUMS

docker: ## the linux/$(DOCKER_ARCH) syncd binary in $(DIST)/, then the image $(DOCKER_IMAGE):$(VERSION) (Dockerfile)
	mkdir -p $(DIST)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(DOCKER_ARCH) go build -trimpath -ldflags "$(RELEASE_LDFLAGS)" -o $(DIST)/syncd-linux-$(DOCKER_ARCH) ./cmd/syncd
	docker build --build-arg TARGETARCH=$(DOCKER_ARCH) -t $(DOCKER_IMAGE):$(VERSION) -t $(DOCKER_IMAGE):latest .

print-ldflags: # what build, static, release and docker stamp (cmd/syncd's tests read it)
	@echo '$(LDFLAGS)'

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
