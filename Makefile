# The two commands of the README:
#   make run   builds ats-proxy and runs it on its default configuration
#   make test  builds everything and runs the whole test suite (what CI runs)
SHELL := /bin/bash
SWIFT ?= swift
CONFIG ?=
ARGS ?=
BIN = .build/debug/ats-proxy

.PHONY: run test build format lint-format bootstrap

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
