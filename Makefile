# The two commands of the README:
#   make run   builds ats-proxy and runs it on its default configuration
#   make test  builds everything and runs the whole test suite (what CI runs)
SHELL := /bin/bash
SWIFT ?= swift
CONFIG ?=
ARGS ?=
BIN = .build/debug/ats-proxy

.PHONY: run test build format lint-format bootstrap release install uninstall package

bootstrap:
	@scripts/bootstrap build

build: bootstrap
	$(SWIFT) build

run: build
	$(BIN) $(if $(CONFIG),--config $(CONFIG),) $(ARGS)

test:
	@scripts/bootstrap test
	@scripts/check-build
	$(SWIFT) test --parallel --num-workers 2 2>&1 | tee .build/test.log; exit $${PIPESTATUS[0]}

format:
	$(SWIFT) format --in-place --recursive Sources Tests Package.swift

lint-format:
	$(SWIFT) format lint --strict --recursive Sources Tests Package.swift

# Fuzzing and sanitizers (README, "Fuzzing and sanitizers"); CI runs all three after `make test`.
.PHONY: fuzz sanitize-address sanitize-thread
FUZZ_SECONDS ?= 60

fuzz:
	@scripts/fuzz all $(FUZZ_SECONDS)

sanitize-address:
	@scripts/sanitize address

sanitize-thread:
	@scripts/sanitize thread

# Install and packages (docs/INSTALL.md). One release build, with the version and commit of scripts/version
# compiled in (Package.swift, CATSBuildInfo); on Linux the Swift runtime is linked in (--static-swift-stdlib).
#   make install PREFIX=/usr/local [DESTDIR=…]   binary, completions, man page, docs
#   make uninstall PREFIX=/usr/local             removes what install put there
#   make package                                 dist/: the Linux archive and the .deb (scripts/package)
PREFIX ?= /usr/local
DESTDIR ?=
# Where the release build goes (SwiftPM's scratch path; another one lets it run beside a debug build).
RELEASE_SCRATCH ?= .build
RELEASE_BIN = $(RELEASE_SCRATCH)/release/ats-proxy
ifeq ($(shell uname -s),Linux)
RELEASE_FLAGS ?= --static-swift-stdlib
endif

release: bootstrap
	ATS_PROXY_BUILD_VERSION="$$(scripts/version)" ATS_PROXY_BUILD_COMMIT="$$(scripts/version --commit)" \
	  $(SWIFT) build -c release --scratch-path $(RELEASE_SCRATCH) --product ats-proxy $(RELEASE_FLAGS)

install: release
	@scripts/install "$(DESTDIR)$(PREFIX)" $(RELEASE_BIN)

uninstall:
	@scripts/install --uninstall "$(DESTDIR)$(PREFIX)"

package:
	@scripts/package
