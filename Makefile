# Tessera: the two-command quick start (`make demo`, `make test`) and the benchmarks.
# Each target installs the system packages it needs when they are missing (apt-get; sudo only
# when not root), so a fresh Debian machine with Swift needs nothing else.

SWIFT       ?= swift
SUDO        := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_INSTALL := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends
# The release build links the Swift runtime and Foundation statically: the installed binary needs
# only the system's libraries (libcurl, libxml2, SQLite, OpenSSL), and starts in 12 ms of CPU, not
# 17 (no dynamic symbol lookups into the toolchain's libraries). It is linked by the toolchain's
# lld with packed relative relocations (DT_RELR, glibc 2.36+): the loader reads 28 KB of them
# instead of 4.5 MB (189,514 entries) at every start, 8.9 -> 8.3 ms of CPU for `tessera --version`.
# Concrete generic types are made by their metadata accessors, not from mangled names: a type made
# from its mangled name has its generic requirements checked at run time, each check a scan of
# the binary's 10,852 protocol conformance records the first time it is asked (about 650,000
# instructions). The compiler makes that choice itself where the runtime predates mangled names;
# it changes how metadata is found, not what the program does. A one-file `tessera get`:
# 100.5 -> 75.5 M instructions (callgrind); P1's 2,000 files: 1,367.6 -> 1,326.6 M.
# No `$ORIGIN` run path (`--disable-local-rpath`): nothing of ours is a shared library, and the
# loader looked in the binary's own directory first for each of the eight libraries it names
# (eighteen failed opens at every start, eleven of them hardware-capability subdirectories; about
# 0.1 ms: `tessera --version` 12.71 -> 12.59 ms, medians of 600 alternating runs).
RELEASE     := -c release --static-swift-stdlib --disable-local-rpath -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs \
	-Xswiftc -Xfrontend -Xswiftc -disable-concrete-type-metadata-mangled-name-accessors

# Headers and pkg-config files the build needs: libcurl (OpenSSL flavour), libxml2, SQLite.
BUILD_PACKAGES := libcurl4-openssl-dev libxml2-dev libsqlite3-dev libssl-dev pkg-config
# ffmpeg merges a video's tracks or parts into one file (get; --no-merge does without).
MEDIA_PACKAGES := ffmpeg
# A TLS and HTTP/2 peer for the engine tests, and ffmpeg/ffprobe for the merge tests; for
# `tessera serve`'s acceptance (serve-check): aria2c to run the same aria2p script against,
# python3-venv for aria2p, and Chromium for the dashboard.
SERVE_PACKAGES := aria2 python3 python3-venv chromium
# The fleet's tests, demo and benchmark start a PostgreSQL 15 of their own (initdb, pg_ctl).
FLEET_PACKAGES := postgresql-15
TEST_PACKAGES  := nginx-light openssl tmux $(MEDIA_PACKAGES) $(SERVE_PACKAGES) $(FLEET_PACKAGES)
# What the benchmark compares against.
BENCH_PACKAGES := nginx-light aria2 curl python3

.PHONY: public-api all demo test bench bench-cli conformance docs build deps bench-deps clean help install check fuzz soak serve-check live-bench fleet-demo fleet-bench fleet-soak
DOCC ?= $(shell command -v docc || echo "$(dir $(realpath $(shell command -v $(SWIFT))))docc")
# What the conformance check compares against: aria2c from apt, yt-dlp from PyPI in a venv.
CONFORMANCE_PACKAGES := aria2 python3 python3-venv

all: build

help:
	@echo "make demo   download a handful of files from an embedded loopback origin (then try tessera serve)"
	@echo "make test   build and run the test suite"
	@echo "make bench  the engine against curl and aria2c; tessera get on DASH/HLS/Metalink against yt-dlp and aria2c"
	@echo "make bench-cli [BASELINE=old/tessera]  tessera get/resolve on many files and segments, one large file and kills, against curl and aria2c"
	@echo "make serve-check  tessera serve driven by aria2p (and the same script against aria2c --enable-rpc), its dashboard in headless Chromium"
	@echo "make fleet-demo  three tessera serve --fleet workers on a PostgreSQL of their own, one killed mid-download, files verified, takeover time printed"
	@echo "make fleet-bench  the fleet's targets: takeover after SIGKILL, enqueue to first byte, claims/s with 100,000 queued"
	@echo "make fleet-soak [FLEET_KILL_CYCLES=200]  the fleet's kill cycles, longer"
	@echo "make conformance  DASH segment lists and HLS downloads against yt-dlp, Metalink downloads against aria2c"
	@echo "make live-bench   live HLS and DASH recorded by tessera and streamlink side by side; tessera's CPU on an 8 Mbit/s stream"
	@echo "make docs   the DocC documentation of Tessera into .build/docs (warnings are errors)"
	@echo "make install [PREFIX=/usr/local] [DESTDIR=]  the tessera command, its man page and bash/zsh/fish completions"
	@echo "make check  the test suite under ThreadSanitizer, then AddressSanitizer (slow)"
	@echo "make soak   10,000 segments over 20 entities with 5% faults: byte-identical, memory and open files flat"
	@echo "make fuzz [FUZZ_SECONDS=600] [FUZZ_TARGETS=...]  libFuzzer on every parser, FUZZ_SECONDS each"

# apt-get update runs only when something is missing, and only once.
define ensure_packages
	@missing=""; for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "Installing:$$missing"; \
		$(SUDO) apt-get update -qq && $(APT_INSTALL) $$missing; \
	fi
endef

# Both executables of the command line (`$(1)`: the build's flags, e.g. $(RELEASE)): `tessera`,
# and `tessera-server`, which its `serve`, `fleet` and `demo` hand over to.
define build_cli
	$(SWIFT) build $(1) --product tessera
	$(SWIFT) build $(1) --product tessera-server
endef

deps:
	$(call ensure_packages,$(BUILD_PACKAGES))

bench-deps: deps
	$(call ensure_packages,$(BENCH_PACKAGES))

build: deps
	$(SWIFT) build

# The release binaries, the man page (argument-parser's generate-manual tool) and completions.
# `tessera` goes to bin; `tessera-server`, which `tessera serve`, `fleet` and `demo` hand over to
# (Sources/tessera/ServerExecutable.swift), to libexec/tessera (tessera also looks beside itself).
# The man page and the completions are written from the whole command tree (tessera hands the
# requests for them over too).
PREFIX ?= /usr/local
# (The man page comes from argument-parser's generate-manual tool run on the release binary, built
# with the same flags: its plugin rebuilt every product with the default flags over the release
# build, and the binary installed was that one, not the static one.)
install: deps
	$(call build_cli,$(RELEASE))
	$(SWIFT) build $(RELEASE) --product generate-manual
	bin="$$($(SWIFT) build -c release --show-bin-path)" && root="$(DESTDIR)$(PREFIX)" && \
	mkdir -p .build/manual && "$$bin/generate-manual" "$$bin/tessera" --output-directory .build/manual && \
	install -D -m 755 "$$bin/tessera" "$$root/bin/tessera" && \
	install -D -m 755 "$$bin/tessera-server" "$$root/libexec/tessera/tessera-server" && \
	install -D -m 644 .build/manual/tessera.1 "$$root/share/man/man1/tessera.1" && \
	mkdir -p "$$root/share/bash-completion/completions" "$$root/share/zsh/site-functions" "$$root/share/fish/vendor_completions.d" && \
	"$$bin/tessera" --generate-completion-script bash > "$$root/share/bash-completion/completions/tessera" && \
	"$$bin/tessera" --generate-completion-script zsh > "$$root/share/zsh/site-functions/_tessera" && \
	"$$bin/tessera" --generate-completion-script fish > "$$root/share/fish/vendor_completions.d/tessera.fish" && \
	echo "Installed $$root/bin/tessera and $$root/libexec/tessera/tessera-server, which runs tessera serve, fleet and demo (man tessera; completions for bash, zsh, fish)"

demo: deps
	$(call ensure_packages,$(MEDIA_PACKAGES))
	$(call build_cli,)
	$$($(SWIFT) build --show-bin-path)/tessera demo
	@echo "Next: the same downloads from a daemon that aria2's RPC clients (aria2p, AriaNg) drive, with a live dashboard:"
	@echo "  $$($(SWIFT) build --show-bin-path)/tessera serve --rpc-secret SECRET    then open http://127.0.0.1:6800/ (README: The daemon)"

# Two phases: everything in parallel, then the wall-clock measurements (suites named
# ...TimingTests) one at a time, so neither the first phase nor each other can disturb them.
# Run one at a time, after the rest: the wall-clock suites, those that start processes
# (ffmpeg, the crash helper, the fuzz replay, the fleet's PostgreSQL servers and workers, the
# Metalink memory measurements' 100,000-file helpers, which kept two cores busy for 40 s and
# starved the parallel phase's timed windows on CI), and the live recordings
# (a stream published on a clock, recorded against it).
SERIAL_SUITES := TimingTests|Fleet|MediaMergerFFmpegTests|CLIMergeTests|CrashMatrixTests|FuzzCorpusTests|LiveRecordingTests|CLILiveTests|MetalinkMemoryTests
test: deps
	$(call ensure_packages,$(TEST_PACKAGES))
	$(SWIFT) build --build-tests
	$(MAKE) --no-print-directory public-api
	$(SWIFT) test --skip-build --skip '$(SERIAL_SUITES)'
	# Again on engines of two threads, as the tessera command runs (its own tests already do).
	TESSERA_TEST_ENGINE_THREADS=2 $(SWIFT) test --skip-build --skip '$(SERIAL_SUITES)|CLI'
	$(SWIFT) test --skip-build --filter '$(SERIAL_SUITES)' --no-parallel
	$(MAKE) --no-print-directory serve-check

# The public API on purpose: every public type of Tessera, TesseraTesting and the plugins is
# listed in docs/public-api.md with what it is for, and every type listed there is public (from
# the symbol graphs SwiftPM extracts; python3 reads them).
SYMBOL_GRAPHS := .build/public-api-symbol-graphs
public-api: deps
	rm -rf $(SYMBOL_GRAPHS)
	$(SWIFT) package dump-symbol-graph --minimum-access-level public --skip-synthesized-members --omit-extension-block-symbols > $(SYMBOL_GRAPHS).log 2>&1 || { cat $(SYMBOL_GRAPHS).log; exit 1; }
	mkdir -p $(SYMBOL_GRAPHS) && cp "$$(sed -n 's/^Files written to //p' $(SYMBOL_GRAPHS).log)"/*.symbols.json $(SYMBOL_GRAPHS)/
	python3 Tests/PublicAPI/check_public_api.py --symbol-graphs $(SYMBOL_GRAPHS) --page docs/public-api.md

# `tessera serve` as aria2's clients see it: aria2p (PyPI, pinned, in a virtualenv under .build)
# drives the daemon through add, status, pause/unpause, remove, a plain URL, a DASH MPD and a
# Metalink, and the same script drives aria2c --enable-rpc; then the dashboard in headless
# Chromium (its screenshot in .build/serve-acceptance/dashboard.png). Every server is started on
# 127.0.0.1 by the scripts and stopped by them.
SERVE_VENV := .build/serve-acceptance/venv
SERVE_PYTHON_REQUIREMENTS := aria2p==0.12.3
serve-check: deps
	$(call ensure_packages,$(SERVE_PACKAGES))
	$(call build_cli,)
	@if [ "$$(cat $(SERVE_VENV)/requirements.txt 2>/dev/null)" != "$(SERVE_PYTHON_REQUIREMENTS)" ]; then \
		echo "serve-check: creating $(SERVE_VENV) with $(SERVE_PYTHON_REQUIREMENTS)"; \
		python3 -m venv $(SERVE_VENV) && \
		$(SERVE_VENV)/bin/pip install -q --disable-pip-version-check $(SERVE_PYTHON_REQUIREMENTS) && \
		echo "$(SERVE_PYTHON_REQUIREMENTS)" > $(SERVE_VENV)/requirements.txt; \
	fi
	bin="$$($(SWIFT) build --show-bin-path)" && \
	$(SERVE_VENV)/bin/python Tests/ServeAcceptance/aria2p_acceptance.py --tessera "$$bin/tessera" --target both && \
	$(SERVE_VENV)/bin/python Tests/ServeAcceptance/dashboard_chromium.py --tessera "$$bin/tessera" \
		--screenshot .build/serve-acceptance/dashboard.png

# The suite under the sanitizers, each in a build directory of its own (the wall-clock suites
# are left out: a sanitizer slows everything several times; under ASan, the memory suites too:
# its quarantine keeps freed memory). The tests run one at a time: all
# at once, hundreds of engines and origins slowed several times starve each other on two cores
# and tests time out waiting. The Swift runtime's crash backtracer is off: under
# TSan, the process it spawns on a crash trips TSan's own fork check and the run hangs instead
# of failing.
# LeakSanitizer is on (ASAN_LEAKS=0 turns it off): at the test process's exit it reports what is
# still allocated and unreachable, including objects that only suspended tasks' frames hold
# (Swift's task allocator hides those references from it), so every test shuts down what it
# started (managers, engines, servers) and reads files without Foundation's leaking readers
# (fileContents/fileText). Tests/Sanitizers/lsan.supp lists the few one-time globals of
# dependencies, each with its reason.
ASAN_LEAKS ?= 1
check: deps
	$(call ensure_packages,$(TEST_PACKAGES))
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build/tsan
	SWIFT_BACKTRACE=enable=no $(SWIFT) test --skip-build --sanitize=thread --scratch-path .build/tsan --skip TimingTests --no-parallel
	$(SWIFT) build --build-tests --sanitize=address --scratch-path .build/asan
	SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=$(ASAN_LEAKS) LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/Sanitizers/lsan.supp $(SWIFT) test --skip-build --sanitize=address --scratch-path .build/asan --skip 'TimingTests|MemoryTests' --no-parallel

# The fleet (docs/fleet.md): three `tessera serve --fleet` workers against a PostgreSQL 15 of
# their own on 127.0.0.1, one SIGKILLed mid-download; every file verified, the takeover printed.
fleet-demo: deps
	$(call ensure_packages,$(FLEET_PACKAGES))
	$(call build_cli,)
	$(SWIFT) build --product tessera-fleet-bench
	bin="$$($(SWIFT) build --show-bin-path)" && "$$bin/tessera-fleet-bench" demo --tessera "$$bin/tessera"

# The issue's targets for the fleet, measured (not timed tests): takeover after SIGKILL with a
# 2 s lease and with the defaults, enqueue to first byte (p50), claims/s with 100,000 queued.
fleet-bench: deps
	$(call ensure_packages,$(FLEET_PACKAGES))
	$(call build_cli,$(RELEASE))
	$(SWIFT) build $(RELEASE) --product tessera-fleet-bench
	bin="$$($(SWIFT) build -c release --show-bin-path)" && "$$bin/tessera-fleet-bench" bench --tessera "$$bin/tessera"

# The kill cycles of the fleet's tests, longer (make test runs 20).
FLEET_KILL_CYCLES ?= 200
fleet-soak: deps
	$(call ensure_packages,$(FLEET_PACKAGES))
	$(SWIFT) build --build-tests
	TESSERA_FLEET_KILL_CYCLES=$(FLEET_KILL_CYCLES) $(SWIFT) test --skip-build --filter randomKillCycles

# The soak test alone (it measures this process's memory and open files).
soak: deps
	$(SWIFT) build --build-tests
	TESSERA_SOAK=1 $(SWIFT) test --skip-build --filter SoakTests

# libFuzzer with AddressSanitizer on each harness of Tests/Fuzz for FUZZ_SECONDS. The corpus
# grows in .build/fuzz-corpus/<target>, seeded from Tests/Fuzz/Corpus/<target>; an input that
# crashes is left in .build/fuzz-findings/<target>: add it to Tests/Fuzz/Corpus/<target>, where
# `make test` replays it from then on.
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?= mpd m3u8 metalink playurl json naming names
fuzz: deps
	$(SWIFT) build --product tessera-fuzz --scratch-path .build/fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING
	@set -e; for target in $(FUZZ_TARGETS); do \
		mkdir -p .build/fuzz-corpus/$$target .build/fuzz-findings/$$target; \
		echo "fuzzing $$target for $(FUZZ_SECONDS) s"; \
		log=.build/fuzz-findings/$$target.log; \
		if TESSERA_FUZZ_TARGET=$$target .build/fuzz/debug/tessera-fuzz -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
			-rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix=.build/fuzz-findings/$$target/ \
			.build/fuzz-corpus/$$target Tests/Fuzz/Corpus/$$target > $$log 2>&1; \
		then grep -E "^stat::number_of_executed_units|^Done" $$log || true; \
		else tail -n 40 $$log; echo "fuzz: $$target found a failure: see .build/fuzz-findings/$$target"; exit 1; fi; \
	done

# P1/P2: the engine (tessera-engine-bench) against curl and aria2c; P3-P5: the tessera CLI on DASH,
# HLS and Metalink against yt-dlp (the conformance check's virtualenv, hence python3-venv) and aria2c.
bench: bench-deps
	$(call ensure_packages,python3-venv)
	$(SWIFT) build $(RELEASE) --product tessera-engine-bench
	$(SWIFT) build $(RELEASE) --product tessera
	bin="$$($(SWIFT) build -c release --show-bin-path)" && \
	python3 Benchmarks/run.py --tessera "$$bin/tessera-engine-bench" --tessera-cli "$$bin/tessera" $(BENCH_ARGS)

# The command line on many small files and segments, one large file, a long MPD and kills, against
# curl (and aria2c where it applies), alternating, outputs in tmpfs, with every target's ratio at the
# end. A benchmark, not a test: nothing fails on a slow machine. BASELINE=path/to/an/earlier/tessera
# adds its rows, measured in the same rounds (before and after in one run).
BENCH_CLI_SCENARIOS := p1cli,p2cli,p3big,p6,p7,kill
bench-cli: bench-deps
	$(call ensure_packages,python3-venv)
	$(SWIFT) build $(RELEASE) --product tessera
	python3 Benchmarks/run.py --tessera-cli "$$($(SWIFT) build -c release --show-bin-path)/tessera" \
		--scenarios $(BENCH_CLI_SCENARIOS) $(if $(BASELINE),--baseline-cli $(BASELINE)) $(BENCH_ARGS)

# Live recording against streamlink (PyPI, in a virtualenv under .build) on the same live origin
# (tessera-test-helper live-origin, 127.0.0.1), in one run; then tessera's CPU on an 8 Mbit/s stream.
LIVE_VENV := .build/live-bench/venv
live-bench: deps
	$(call ensure_packages,python3-venv $(MEDIA_PACKAGES))
	$(SWIFT) build $(RELEASE) --product tessera
	$(SWIFT) build --product tessera-test-helper
	@[ -x $(LIVE_VENV)/bin/streamlink ] || (python3 -m venv $(LIVE_VENV) && $(LIVE_VENV)/bin/pip install -q --disable-pip-version-check streamlink)
	python3 Benchmarks/live/compare.py --tessera "$$($(SWIFT) build -c release --show-bin-path)/tessera" \
		--helper "$$($(SWIFT) build --show-bin-path)/tessera-test-helper" --streamlink $(LIVE_VENV)/bin/streamlink $(LIVE_ARGS)

# Differential checks against oracles nobody here wrote: the DASH plugin's segment URLs
# against yt-dlp's fragment lists, HLS downloads against yt-dlp's, Metalink downloads against
# aria2c's.
conformance: deps
	$(call ensure_packages,$(CONFORMANCE_PACKAGES))
	$(SWIFT) build --product tessera
	python3 Conformance/run.py --tessera "$$($(SWIFT) build --show-bin-path)/tessera" $(CONFORMANCE_ARGS)

# DocC for the Tessera library: symbol graphs from a build of its own (other flags than the
# normal build, so it does not invalidate it), then docc with warnings as errors.
docs: deps
	$(SWIFT) build --target Tessera --scratch-path .build/docs-build \
		-Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc $(CURDIR)/.build/docs-build/symbol-graphs
	rm -rf .build/docs-symbols && mkdir -p .build/docs-symbols
	cp .build/docs-build/symbol-graphs/Tessera.symbols.json .build/docs-symbols/
	"$(DOCC)" convert Sources/Tessera/Tessera.docc --additional-symbol-graph-dir .build/docs-symbols \
		--fallback-display-name Tessera --fallback-bundle-identifier org.tessera.Tessera \
		--output-path .build/docs --warnings-as-errors
	@echo "Documentation in .build/docs (open with a static web server, e.g. python3 -m http.server -d .build/docs)"

clean:
	rm -rf .build
