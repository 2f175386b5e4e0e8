# Cloudprofiler. `make` builds the library and the tool and runs the demo;
# `make test` runs every test; `make bench` runs the benchmarks.
GO      ?= go
# make's own default CC is cc, so ?= would never apply: gcc unless the
# command line or the environment names another compiler.
ifeq ($(origin CC),default)
CC      := gcc
endif
CFLAGS  ?= -O2 -Wall -Werror
BUILD   := build
LIB     := $(BUILD)/libcloudprofiler.so
TOOL    := $(BUILD)/cloudprofiler
# The Python venv the wheel, the Python tests and the report tests use.
PYENV   := $(BUILD)/pyenv/bin/python
PIP     := $(PYENV) -m pip --disable-pip-version-check
CLINK   := -Icapi -L$(BUILD) -lcloudprofiler -Wl,-rpath,'$$ORIGIN' -lpthread
# The JNI glue (libcp/jni.c) needs a JDK's jni.h: found from javac (or
# $JAVA_HOME). Without one the library builds without the Java binding.
JAVA_HOME ?= $(patsubst %/bin/javac,%,$(realpath $(shell command -v javac 2>/dev/null)))
JNI_CFLAGS := $(if $(wildcard $(JAVA_HOME)/include/jni.h),-I$(JAVA_HOME)/include -I$(JAVA_HOME)/include/linux)
export CGO_CFLAGS := -O2 -g $(JNI_CFLAGS)
GOSRC   := $(shell find libcp internal handlers tsc cmd minrtt confserver datagen -name '*.go' -o -name '*.c' -o -name '*.h' -o -name '*.s') capi/cloudprofiler.h go.mod go.sum

.PHONY: all build demo test test-go test-c bench bench-analyze bench-spark clean

all: wheel demo

build: $(LIB) $(TOOL) $(BUILD)/demo $(BUILD)/stage $(BUILD)/tandem $(BUILD)/udpstage

$(LIB): $(GOSRC)
	@mkdir -p $(BUILD)
	$(GO) build -buildmode=c-shared -o $@ ./libcp
	@rm -f $(BUILD)/libcloudprofiler.h   # the contract is capi/cloudprofiler.h

# The tool says the commit it was built from (--version): Go stamps it
# (-buildvcs=auto: this machine's GOFLAGS may say false), and a commit
# that changes no source rebuilds it through build/commit, rewritten only
# when HEAD moves.
$(TOOL): $(GOSRC) $(BUILD)/commit
	@mkdir -p $(BUILD)
	$(GO) build -buildvcs=auto -o $@ ./cmd/cloudprofiler

$(BUILD)/commit: FORCE
	@mkdir -p $(BUILD); c=$$(git rev-parse HEAD 2>/dev/null || echo none); \
	  [ "$$(cat $@ 2>/dev/null)" = "$$c" ] || echo "$$c" > $@
.PHONY: FORCE
FORCE:

$(BUILD)/%: examples/c/%.c $(LIB) capi/cloudprofiler.h
	$(CC) $(CFLAGS) $< -o $@ $(CLINK)

$(BUILD)/stage: examples/pipeline/stage.c $(LIB) capi/cloudprofiler.h
	$(CC) $(CFLAGS) $< -o $@ $(CLINK)

$(BUILD)/tandem: examples/pipeline/tandem.c $(LIB) capi/cloudprofiler.h
	$(CC) $(CFLAGS) $< -o $@ $(CLINK) -lm

$(BUILD)/udpstage: examples/pipeline/udpstage.c $(LIB) capi/cloudprofiler.h
	$(CC) $(CFLAGS) $< -o $@ $(CLINK) -lm

$(BUILD)/%: tests/c/%.c $(LIB) capi/cloudprofiler.h
	$(CC) $(CFLAGS) $< -o $@ $(CLINK)

# The demo: a C program logs 2M tuples through two buffered channels and a
# periodic counter; then the tool decodes what it wrote. Then the inter-node
# method: three processes play three nodes with different TSCs, a TSC server
# and clients measure them, and `analyze` prints latencies with bounds.
demo: build
	@rm -rf $(BUILD)/demo-logs
	CP_LOG_DIR=$(BUILD)/demo-logs $(BUILD)/demo
	$(TOOL) dump $(BUILD)/demo-logs/*
	@echo "first records of the sink channel:"
	@$(TOOL) dump --csv $(BUILD)/demo-logs/*demo_sink.cplog | head -4
	bash examples/multinode/demo.sh $(BUILD)
	@echo "== where to look"
	@echo "report: $(abspath $(BUILD))/multinode-demo/results/report.html (open it in a browser)"
	@echo "trace:  $(abspath $(BUILD))/multinode-demo/results/trace.json (open it in ui.perfetto.dev or chrome://tracing)"

# make test runs every suite to its end, keeps each one's output in
# build/test-logs/, and ends with a summary of what passed and failed (and
# the tail of each failure); it fails if any suite failed. test-report reads
# what test-java's Flink example left, so test-java runs before it.
SUITES := test-go test-fuzz test-analyze-data test-c test-install test-java test-engines test-report test-cluster test-multinode test-capacity test-critpath test-mace test-python test-spark test-docs
test:
	@MAKE='$(MAKE)' bash tests/run-suites.sh $(SUITES)

# Tests of pure arithmetic on one goroutine skip themselves under -race
# (internal/racetest: nothing there for it to watch, and 5-10x slower) and
# run here again without it.
ARITH_TESTS := TestStatsSameAsBefore|TestStatsMerge|TestBucketOfRandom|TestBucketOfBoundaries|TestReadingRangeIsTheTranslation|TestTranslatedIdentical|TestCutRangeIsTheTranslation

test-go:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...
	@out=$$($(GO) test -count=1 -timeout 10m -run '^($(ARITH_TESTS))$$' -v ./internal/analyze ./internal/scaleout ./minrtt) || { echo "$$out"; exit 1; }; \
	echo "$$out" | grep -E '^(--- |ok)'; \
	ran=$$(echo "$$out" | grep -c '^--- PASS'); want=$$(echo '$(ARITH_TESTS)' | tr '|' '\n' | wc -l); \
	[ "$$ran" -eq "$$want" ] || { echo "ARITH_TESTS: $$ran of $$want ran without -race (a test renamed?)"; exit 1; }

# Fuzzing, bounded: each target of tests/fuzz-targets.txt (the log-file
# decoders and counter files, the probe, datagen and configuration-server
# wire decoders, analyze's report of odd topologies) for FUZZTIME with one
# worker; `make test-fuzz FUZZTIME=5m` fuzzes longer. The
# committed seed corpora run under test-go as well.
FUZZTIME ?= 5s
.PHONY: test-fuzz
test-fuzz:
	FUZZTIME=$(FUZZTIME) bash tests/fuzz.sh

test-c: $(LIB) $(TOOL) $(BUILD)/test_abi $(BUILD)/demo
	$(call with-tmp,CP_DUMP=$(abspath $(TOOL)) $(BUILD)/test_abi)

# The tests remove the temporary files they write ($TMPDIR, else /tmp).
# $(call with-tmp,COMMAND) checks it: COMMAND runs with TMPDIR a new,
# empty directory under build/ (this run's own: others running tests at the
# same time cannot confuse the check), which must be empty again afterwards;
# else what was left is listed and the target fails.
with-tmp = t=$$(mktemp -d $(abspath $(BUILD))/tmp.XXXXXX) || exit 1; TMPDIR=$$t $(1); s=$$?; \
	left=$$(cd $$t && find . -mindepth 1 -maxdepth 2 | head -20); rm -rf $$t; \
	if [ -n "$$left" ]; then echo "left in TMPDIR by the tests:"; echo "$$left"; exit 1; fi; exit $$s

# The Java binding (bindings/java, Maven): `make java` builds the jar with
# the library inside (resources/Linux-amd64/) and installs it into ~/.m2 for
# the examples, and the engine modules beside it: cloudprofiler-flink
# (bindings/flink) and cloudprofiler-storm (bindings/storm), docs/flink.md
# and docs/storm.md, and the Flink agent (bindings/flink-agent, one jar a
# TaskManager's -javaagent: names; docs/flink-agent.md). `make test-java`
# runs the binding's JUnit 5 tests (API, loading, a child JVM killed with
# SIGTERM, two classloaders), the engine modules' tests (a MiniCluster job
# with its metrics read back over REST and Prometheus; LocalCluster
# topologies), the agent's (a job with no Cloudprofiler code and a SQL
# query, in a JVM started with the agent), the Flink and Storm examples'
# tests and tests/maven.sh. Maven fetches what it needs from Maven Central.
MVN        ?= mvn -q -B
JAVA_PROPS := -Dcloudprofiler.native.dir=$(abspath $(BUILD))
.PHONY: java test-java bench-java maven-version bench-flink-agent
# A checkout installs its modules as its own version, 0.1.0-<8 hex of its
# path's SHA-256>-SNAPSHOT, so two checkouts on one machine never overwrite
# each other's artifacts in ~/.m2 (a version per commit would pile up one
# per commit; a repository inside build/ would fetch Flink and Storm again
# for every clone). .mvn/maven.config, written here and not committed, gives
# every `mvn` run anywhere in the checkout that version (Maven reads it from
# the nearest parent directory holding .mvn/): the modules' ${revision} and
# the examples' and tests' ${cloudprofiler.version}.
MAVEN_VERSION := 0.1.0-$(shell printf %s '$(CURDIR)' | sha256sum | cut -c1-8)-SNAPSHOT
maven-version:
	@echo $(MAVEN_VERSION)
.mvn/maven.config: FORCE
	@mkdir -p .mvn
	@printf -- '-Drevision=%s\n-Dcloudprofiler.version=%s\n' $(MAVEN_VERSION) $(MAVEN_VERSION) > $@.tmp
	@if cmp -s $@.tmp $@; then rm $@.tmp; else mv $@.tmp $@; fi
java: $(LIB) $(TOOL) .mvn/maven.config
	cd bindings/java && $(MVN) $(JAVA_PROPS) -DskipTests install
	cd bindings/flink && $(MVN) $(JAVA_PROPS) -DskipTests install
	cd bindings/storm && $(MVN) $(JAVA_PROPS) -DskipTests install
	cd bindings/flink-agent && $(MVN) $(JAVA_PROPS) -DskipTests install

# The Flink agent's cost on a job's throughput: with and without it,
# interleaved (tests/bench-flink-agent.sh; N, ROUNDS).
bench-flink-agent: java
	bash tests/bench-flink-agent.sh

# The binding's tests run again on a second, newer JDK when the machine has
# one (JAVA_HOME_2, default the Temurin JDK in /usr/lib/jvm): another JNI
# implementation, the same library.
JAVA_HOME_2 ?= $(firstword $(wildcard /usr/lib/jvm/temurin-2*-jdk*))
test-java: java
	cd bindings/java && $(MVN) $(JAVA_PROPS) surefire:test
	$(if $(JAVA_HOME_2),cd bindings/java && JAVA_HOME=$(JAVA_HOME_2) $(MVN) $(JAVA_PROPS) surefire:test,@echo "test-java: no second JDK, the binding ran on one")
	cd bindings/flink && $(MVN) $(JAVA_PROPS) surefire:test
	cd bindings/storm && $(MVN) $(JAVA_PROPS) surefire:test
	cd bindings/flink-agent && $(MVN) $(JAVA_PROPS) surefire:test failsafe:integration-test failsafe:verify
	cd examples/flink && $(MVN) $(JAVA_PROPS) test
	cd examples/storm && $(MVN) $(JAVA_PROPS) test
	bash tests/maven.sh

# Real engines as people run them (issue 43): a Flink job and a Storm
# topology of our own, in the engines' default settings (Flink's 100 ms
# buffer timeout, Storm's batching and wait strategies), overloaded and at a
# light load, marked only as docs/flink.md and docs/storm.md say (Storm:
# wrapped, and the task hook alone); each operator's capacity, busy share,
# load and bottleneck against a truth taken inside the user functions
# (departure times, and the thread's state sampled), beside Flink's own
# busy-time rate and Storm UI's capacity of the same runs
# (tests/engines/*/README.md).
.PHONY: test-engines
test-engines: java
	cd tests/engines/flink && $(MVN) $(JAVA_PROPS) test
	cd tests/engines/storm && $(MVN) $(JAVA_PROPS) test

# The pipeline against the analysis it replaced (internal/analyze/
# reference_test.go), on logs the library writes: bench-analyze's data, 1M
# records, in a directory removed afterwards.
# A fresh Debian 12 in a chroot (debootstrap minbase, under build/): .ci/run
# --setup installs what the build needs, Go from the module proxy among it,
# then `make` builds and runs the demos. Root and the network; not in make
# test (it fetches a Debian and about 1 GB of packages).
.PHONY: test-fresh
test-fresh:
	bash tests/fresh-debian.sh

.PHONY: test-analyze-data
test-analyze-data: $(LIB) $(TOOL) $(BUILD)/logmany
	@rm -rf $(BUILD)/analyze-data
	bash tests/analyze-data.sh $(BUILD) $(BUILD)/analyze-data 250000
	CP_ANALYZE_DATA=$(abspath $(BUILD))/analyze-data $(GO) test -count=1 -run 'TestPipelineMatchesReferenceOnLogs' ./internal/analyze
	@rm -rf $(BUILD)/analyze-data

# Multi-node on one machine (root): network namespaces on a bridge, a fake
# TSC per node, TSC server and clients with injected delay, a C pipeline under
# CPU load, then `analyze`: every duration's bound must hold the exact truth.
.PHONY: test-multinode
test-multinode: $(LIB) $(TOOL)
	@CP_TOOL=$(abspath $(TOOL)) CP_LIB=$(abspath $(LIB)) $(GO) test -count=1 -v -timeout 4m ./tests/multinode > $(BUILD)/multinode.log 2>&1; \
	  s=$$?; cat $(BUILD)/multinode.log; \
	  if [ $$s -ne 0 ]; then echo "---- test-multinode failed; its checks' lines (all of it above, and in $(BUILD)/multinode.log):"; \
	    grep -E -- "--- FAIL|_test\.go:[0-9]+: check failed: " $(BUILD)/multinode.log | tail -n 40; fi; exit $$s

# The report and the trace (tests/report): the multinode demo's report,
# the Flink example's (examples/flink's ProfiledJobTest leaves it in
# target/cp-analysis: make test runs test-java first, and then requires
# it) and those of logs that lack things, read in headless Chromium;
# screenshots in build/report-shots. The trace against the Trace Event
# Format and durations.csv.
.PHONY: test-report
test-report: $(LIB) $(TOOL) $(BUILD)/demo $(BUILD)/stage $(BUILD)/udpstage | $(PYENV)
	@$(PYENV) -c 'import perfetto.protos.perfetto.trace.perfetto_trace_pb2' 2>/dev/null || $(PIP) install -q perfetto protobuf
	CP_TOOL=$(abspath $(TOOL)) CP_BUILD=$(abspath $(BUILD)) CP_SHOTS=$(abspath $(BUILD))/report-shots CP_UDPSTAGE=$(abspath $(BUILD)/udpstage) \
	CP_PYTHON=$(abspath $(PYENV)) \
	CP_FLINK_REPORT=$(abspath examples/flink/target/cp-analysis/report.html) $(if $(filter test,$(MAKECMDGOALS)),CP_FLINK_REQUIRED=1) \
	$(GO) test -count=1 -v -timeout 8m ./tests/report

# Real clusters (tests/cluster, issue 16): a standalone Flink 2.3 cluster
# assembled from Maven Central (tests/cluster/flink copies what a
# distribution's lib/ holds; Maven Central has no flink-dist for 2.x), the
# example job submitted as a job jar over REST: on loopback, and with the
# JobManager and two TaskManagers each on a node (network namespace) of its
# own, TSC clients and rounds, then analyze (root; skips without); and a
# job with no code of ours (tests/cluster/flink-job) on a cluster whose
# TaskManagers start with the agent (issue 45).
.PHONY: test-cluster
test-cluster: java
	cd tests/cluster/flink && $(MVN) package
	cd tests/cluster/flink-job && $(MVN) package
	cd tests/cluster/storm && $(MVN) package && cd zookeeper && $(MVN) package
	cd examples/flink && $(MVN) $(JAVA_PROPS) package -DskipTests
	cd examples/storm && $(MVN) $(JAVA_PROPS) package -DskipTests
	CP_TOOL=$(abspath $(TOOL)) CP_FLINK_LIB=$(abspath tests/cluster/flink/target/lib) \
	CP_BINDING_JAR=$(abspath bindings/java/target/cloudprofiler-java-0.1.0.jar) \
	CP_STORM_MODULE_JAR=$(abspath bindings/storm/target/cloudprofiler-storm-0.1.0.jar) \
	CP_FLINK_JOB_JAR=$(abspath examples/flink/target/cloudprofiler-flink-example-0.1.0.jar) \
	CP_FLINK_AGENT_JAR=$(abspath bindings/flink-agent/target/cloudprofiler-flink-agent-0.1.0.jar) \
	CP_FLINK_PLAIN_JOB_JAR=$(abspath tests/cluster/flink-job/target/flink-plain-job-0.1.0.jar) \
	CP_STORM_LIB=$(abspath tests/cluster/storm/target/lib) CP_STORM_LIB_WORKER=$(abspath tests/cluster/storm/target/lib-worker) \
	CP_ZOOKEEPER_LIB=$(abspath tests/cluster/storm/target/zookeeper) \
	CP_STORM_TOPOLOGY_JAR=$(abspath examples/storm/target/cloudprofiler-storm-example-0.1.0.jar) \
	CP_STORM_THIN_JAR=$(abspath examples/storm/target/original-cloudprofiler-storm-example-0.1.0.jar) \
	$(GO) test -count=1 -v -timeout 12m ./tests/cluster

# Capacity against the same run's records (tests/capacity): pipelines of
# processes over UDP (examples/pipeline/udpstage.c) with a process spinning
# beside them, no real-time priority, no pinning: each operator's capacity
# against its departures per second while backlogged, worked out of the
# records; a split, a filter and loss; the Beard & Chamberlain estimates of
# tandem's count channels against its in/out marks.
.PHONY: test-capacity
test-capacity: $(LIB) $(TOOL) $(BUILD)/tandem $(BUILD)/udpstage
	$(call with-tmp,CP_TOOL=$(abspath $(TOOL)) CP_TANDEM=$(abspath $(BUILD)/tandem) CP_UDPSTAGE=$(abspath $(BUILD)/udpstage) $(GO) test -count=1 -v -timeout 10m ./tests/capacity/)

# The critical-path analysis against the same run's truth (tests/critpath):
# tandem, under the normal scheduler, at heavy and light load, as a
# fork-join, with a burst (the queueing tandem measured with rdtsc);
# criticalpath.csv and breakdown.csv against it; bad input never panics.
.PHONY: test-critpath
test-critpath: $(LIB) $(TOOL) $(BUILD)/tandem
	$(call with-tmp,CP_TOOL=$(abspath $(TOOL)) CP_TANDEM=$(abspath $(BUILD)/tandem) $(GO) test -count=1 -v -timeout 10m ./tests/critpath/)

# Mace against the same run's records (tests/mace): udpstage pipelines fed
# by an on-off source beside a busy process: the worst latency predicted
# and the theorem's interval per window against the latencies in the logs,
# no relative error without excess, a drifting cost flagged, bad input
# never panics. `make bench-mace` prints rate=x0.5's prediction beside a
# run made that way right after (two runs taken apart: not a test).
.PHONY: test-mace bench-mace
test-mace: $(LIB) $(TOOL) $(BUILD)/udpstage
	$(call with-tmp,CP_TOOL=$(abspath $(TOOL)) CP_UDPSTAGE=$(abspath $(BUILD)/udpstage) $(GO) test -count=1 -v -timeout 10m ./tests/mace/)
bench-mace: $(LIB) $(TOOL) $(BUILD)/udpstage
	@$(call with-tmp,CP_BENCH_MACE=1 CP_TOOL=$(abspath $(TOOL)) CP_UDPSTAGE=$(abspath $(BUILD)/udpstage) $(GO) test -count=1 -v -timeout 10m -run 'TestMaceWhatIfRate$$' ./tests/mace/)

# The Python wheel (bindings/python): build/wheel/cloudprofiler-*-py3-none-
# linux_<machine>.whl, with the library just built inside (setup.py copies
# build/libcloudprofiler.so and refuses one older than its sources). Built by
# pip in the venv build/pyenv; pip fetches setuptools from PyPI the first time.
PYSRC := $(wildcard bindings/python/cloudprofiler/*.py) bindings/python/setup.py \
         bindings/python/pyproject.toml bindings/python/README.md
.PHONY: wheel
wheel: $(BUILD)/wheel/.built
$(BUILD)/wheel/.built: $(LIB) $(TOOL) $(PYSRC) | $(PYENV)
	@rm -rf $(BUILD)/wheel
	$(PIP) wheel -q --no-deps -w $(BUILD)/wheel ./bindings/python
	@touch $@
$(PYENV):
	python3 -m venv $(BUILD)/pyenv

# The Python binding's tests: numpy, pandas, pyarrow, duckdb, pytest,
# setuptools and wheel (and the notebook test's nbclient, nbformat, ipykernel,
# matplotlib) from PyPI on first use, the wheel installed, then its tests with
# pytest (temporary files in build/pytest, removed after a run that passed).
.PHONY: test-python
test-python: wheel $(TOOL)
	@$(PYENV) -c 'import numpy, pandas, pyarrow, duckdb, pytest, setuptools, wheel, nbclient, nbformat, ipykernel, matplotlib' 2>/dev/null || \
	  $(PIP) install -q numpy pandas pyarrow duckdb pytest setuptools wheel nbclient nbformat ipykernel matplotlib
	$(PIP) install -q --no-deps --force-reinstall $(BUILD)/wheel/cloudprofiler-*.whl
	$(call with-tmp,CLOUDPROFILER_LIB=$(abspath $(LIB)) CP_TOOL=$(abspath $(TOOL)) \
	  $(PYENV) -m pytest -q -p no:cacheprovider --basetemp=$(BUILD)/pytest bindings/python/tests)
	@rm -rf $(BUILD)/pytest

# The analysis on Apache Spark (tests/spark, docs/spark.md): pyspark from
# PyPI (Spark 4 runs on the JDK the build already needs), Spark in local
# mode on an export of the bench's logs and of the multinode demo's,
# against analyze on the same logs; then a standalone master and two
# workers, each in a network namespace, the job given to spark-submit.
SPARK_PY := pyspark==4.0.1
.PHONY: test-spark
test-spark: wheel $(TOOL) $(BUILD)/logmany $(BUILD)/stage $(BUILD)/demo
	@$(PYENV) -c 'import pyspark, numpy, pandas, pyarrow, pytest; assert pyspark.__version__ == "$(SPARK_PY:pyspark==%=%)"' 2>/dev/null || \
	  $(PIP) install -q $(SPARK_PY) numpy pandas pyarrow pytest
	$(PIP) install -q --no-deps --force-reinstall $(BUILD)/wheel/cloudprofiler-*.whl
	$(call with-tmp,CP_TOOL=$(abspath $(TOOL)) CP_BUILD=$(abspath $(BUILD)) \
	  $(PYENV) -m pytest -q -p no:cacheprovider --basetemp=$(BUILD)/pytest-spark tests/spark)
	@rm -rf $(BUILD)/pytest-spark
	$(call with-tmp,CP_TOOL=$(abspath $(TOOL)) CP_BUILD=$(abspath $(BUILD)) CP_PYTHON=$(abspath $(PYENV)) \
	  $(GO) test -count=1 -v -timeout 10m ./tests/spark)

# make bench-spark (docs/spark.md): the analysis on Spark, local[1] and
# local[2], next to analyze on the same logs in the same run, for 10M and
# 100M records (SPARK_NS="2500000 25000000 250000000" adds 1,000M: about
# 25 minutes more); each Spark run's summary.csv must be analyze's.
SPARK_NS ?= 2500000 25000000
.PHONY: bench-spark
bench-spark: $(TOOL) $(BUILD)/logmany wheel
	@$(PYENV) -c 'import pyspark, numpy, pandas, pyarrow' 2>/dev/null || $(PIP) install -q $(SPARK_PY) numpy pandas pyarrow
	$(PIP) install -q --no-deps --force-reinstall $(BUILD)/wheel/cloudprofiler-*.whl
	bash tests/bench-spark.sh $(BUILD) $(abspath $(PYENV)) "$(SPARK_NS)"

# Benchmarks: ns per LogTS from C next to the floor measured in the same run;
# 10 s sustained ZSTD_TSC logging with bytes/record and memory; idle CPU; the
# Go encoder; minrtt's translation of one duration or reading. Bursts of 1M
# records fit a ring of 32 blocks of 64Ki records; then bursts of half the
# ring a channel gets by default (`build/bench halfring`).
# The NET_CONF row has no server: the channel runs its fallback, NULLH.
# First, why LogTS reads rdtscp (tests/c/tscorder.c): the work that rdtsc's
# stamps leave out.
bench: $(LIB) $(TOOL) $(BUILD)/bench $(BUILD)/sustained $(BUILD)/tscorder
	$(BUILD)/tscorder
	@rm -rf $(BUILD)/bench-logs && mkdir -p $(BUILD)/bench-logs
	CP_LOG_DIR=$(BUILD)/bench-logs CP_RING_BLOCKS=32 CP_CONF_SERVER= $(BUILD)/bench
	CP_LOG_DIR=$(BUILD)/bench-logs CP_CONF_SERVER= $(BUILD)/bench halfring
	@rm -rf $(BUILD)/bench-logs && mkdir -p $(BUILD)/bench-logs
	CP_LOG_DIR=$(BUILD)/bench-logs $(BUILD)/sustained 10 | tee $(BUILD)/sustained.out
	@want=$$(sed -n 's/^records=//p' $(BUILD)/sustained.out); \
	got=$$($(TOOL) dump --csv $(BUILD)/bench-logs/*-sustained.cplog | tail -n +2 | wc -l); \
	echo "sustained: decoder counts $$got records, $$want logged"; test "$$got" = "$$want"
	@rm -rf $(BUILD)/bench-logs
	$(GO) test -run '^$$' -bench . -benchtime 200x ./internal/logfile
	$(GO) test -run '^$$' -bench 'Duration|Point' ./minrtt
	@$(MAKE) --no-print-directory bench-peers
	@$(MAKE) --no-print-directory bench-nanolog

# LogTS next to its peers in one process (tests/c/peers/peers.cc): bare
# rdtscp + a 16-byte store (the floor), rdtsc + store, LogTS and LogTSMany
# on BUFFER_IDENTITY ZSTD_TSC channels, an LTTng-UST tracepoint with one
# 64-bit field in an active session, spdlog's async and sync file loggers
# with one integer field; ns per event and the ratio to the floor burst just
# before it, in interleaved rounds of 1M-event bursts. tests/bench-peers.sh
# runs it on the default ring and on CP_RING_BLOCKS=32, quiet and with a CPU
# hog, and sets up LTTng's session. The peers come from Debian's packages,
# installed here when missing (make test needs none of them). ~3 minutes.
PEER_PKGS := g++ liblttng-ust-dev lttng-tools libspdlog-dev
PEERS_CXX := g++ -std=c++17 -O2 -Wall -Werror
.PHONY: bench-peers bench-nanolog peer-pkgs
peer-pkgs:
	@missing=$$(for p in $(PEER_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then echo "bench: installing" $$missing; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi

$(BUILD)/peers: tests/c/peers/peers.cc tests/c/peers/peers_tp.c tests/c/peers/peers_tp.h $(LIB) capi/cloudprofiler.h | peer-pkgs
	$(CC) $(CFLAGS) -Itests/c/peers -c tests/c/peers/peers_tp.c -o $(BUILD)/peers_tp.o
	$(PEERS_CXX) -DCP_PEERS_LTTNG -DCP_PEERS_SPDLOG $$(pkg-config --cflags spdlog) -Itests/c/peers tests/c/peers/peers.cc \
	  $(BUILD)/peers_tp.o -o $@ $(CLINK) $$(pkg-config --libs spdlog) -llttng-ust -ldl

bench-peers: $(BUILD)/peers
	LTTNG=1 bash tests/bench-peers.sh $(BUILD) $(BUILD)/peers

# NanoLog (its C++17 mode: runtime/ and NanoLogCpp17.h, one NANO_LOG with
# one %ld) in the same rounds, next to the floors and LogTS, from a snapshot
# of its repository the caller gives: make bench-nanolog NANOLOG_DIR=DIR.
# Its runtime is built from DIR into build/nanolog-peers on every run (DIR
# may change) as its runtime/GNUmakefile builds libNanoLog.a, whose
# GeneratedCode.cc its preprocessor (python3) makes from
# runtime/testHelper/client.cc; without a snapshot this says how to get one.
# NanoLog's background thread starts with the process and polls every 1 us:
# it runs beside every row of this binary.
NANOLOG_DIR ?=
NANOLOG_RT  := $(NANOLOG_DIR)/runtime
NANOLOG_SRC := Cycles Util Log NanoLog RuntimeLogger TimeTrace
NLB         := $(BUILD)/nanolog-peers
bench-nanolog: $(LIB) capi/cloudprofiler.h
ifeq ($(wildcard $(NANOLOG_RT)/NanoLogCpp17.h),)
	@echo "bench-nanolog: no NanoLog snapshot$(if $(NANOLOG_DIR), in $(NANOLOG_DIR) (no runtime/NanoLogCpp17.h there)). Get one:"
	@echo "  git clone https://github.com/PlatformLab/NanoLog /path/to/NanoLog   (or unpack a snapshot of that repository)"
	@echo "  make bench-nanolog NANOLOG_DIR=/path/to/NanoLog"
	@echo "(measured with its commit 2a94d70 of 2020-12-21; g++ 12, -std=c++17)"
else
	@command -v g++ >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++; }
	@rm -rf $(NLB) && mkdir -p $(NLB)
	g++ -std=c++17 -O3 -E -I$(NANOLOG_RT) $(NANOLOG_RT)/testHelper/client.cc -o $(NLB)/client.cc.i
	python3 $(NANOLOG_DIR)/preprocessor/parser.py --mapOutput=$(NLB)/client.map $(NLB)/client.cc.i
	python3 $(NANOLOG_DIR)/preprocessor/parser.py --combinedOutput=$(NLB)/GeneratedCode.cc $(NLB)/client.map
	g++ -std=c++17 -O3 -DNDEBUG -I$(NANOLOG_RT) -I$(NANOLOG_RT)/testHelper -c $(NLB)/GeneratedCode.cc -o $(NLB)/GeneratedCode.o
	for f in $(NANOLOG_SRC); do \
	  g++ -std=c++17 -O3 -DNDEBUG -I$(NANOLOG_RT) -c $(NANOLOG_RT)/$$f.cc -o $(NLB)/$$f.o || exit 1; done
	$(PEERS_CXX) -DCP_PEERS_NANOLOG -I$(NANOLOG_RT) tests/c/peers/peers.cc $(NLB)/*.o -o $(BUILD)/peers-nanolog $(CLINK) -lrt
	bash tests/bench-peers.sh $(BUILD) $(BUILD)/peers-nanolog
endif

# The Java binding's benchmarks (JMH, bindings/java/jmh): ns per logTS from
# Java next to two JNI floors (an empty native; rdtscp + a 16-byte store)
# measured in the same run, with the same JVM flags and mode: shots of 1M
# calls into a ring emptied before each, as `make bench`; each shot is also
# compared with a burst of each floor timed just before it (jmh-pairs.tsv).
# JMH_ARGS adds options (e.g. JMH_ARGS='-f 1 nullh'); the results stay in
# build/jmh.json. ~2 minutes.
JMH_JAR := bindings/java/jmh/target/benchmarks.jar
.PHONY: bench-java
bench-java: java
	cd bindings/java/jmh && $(MVN) package
	@rm -rf $(BUILD)/jmh-logs $(BUILD)/jmh-pairs.tsv && mkdir -p $(BUILD)/jmh-logs
	CP_LOG_DIR=$(abspath $(BUILD))/jmh-logs CP_RING_BLOCKS=32 CP_CONF_SERVER= \
	  CP_JMH_PAIRS=$(abspath $(BUILD))/jmh-pairs.tsv \
	  java -jar $(JMH_JAR) -rf json -rff $(abspath $(BUILD))/jmh.json $(JMH_ARGS)
	@rm -rf $(BUILD)/jmh-logs
	python3 bindings/java/jmh/report.py $(BUILD)/jmh.json $(BUILD)/jmh-pairs.tsv

# The analysis on 4N records for each N in NS (N tuples through 4 channels
# on 2 fake nodes; 25000000: 100M records; 250000000: 1,000M, about 4 GB of
# page cache for the spill): records/s, CPU, peak RSS against each --mem-mb
# in MEMS, and the ratio to the decoding floor measured in the same run,
# quiet and with a CPU hog; where DuckDB is here (the duckdb module in
# build/pyenv, which make test-python installs, or a duckdb command),
# analyze with summaries only against DuckDB (2 threads) computing the same
# per-hop counts, means, medians and p99s from export's Parquet, each timed,
# DuckDB's counts and medians checked against analyze's (issue 48: at least
# 3x faster); on the first N, durations.parquet's rows a second
# (tests/bench-analyze.sh). About 12 minutes; NS=25000000 alone, 2, and
# half a minute more with DuckDB (not yet run at 1,000M, where the export
# is 13.5 GB and DuckDB takes the memory it likes: 3.4 GB at 100M).
NS ?= 25000000 250000000
MEMS ?= 256 64
bench-analyze: $(LIB) $(TOOL) $(BUILD)/logmany
	bash tests/bench-analyze.sh $(BUILD) "$(NS)" "$(MEMS)"

# Validations that compare measurements taken one after the other (a
# shared machine's load moves between them), so they print their figures
# and are not part of make test: the highest rate capacity predicts
# against what `gen maxrate` finds from outside (tests/capacity), and the
# critical path's counterfactual, halving an operator's work against runs
# made that way (tests/critpath); and how often B&C converges for a 4 us
# operator (the share of the machine it gets decides). About 6 minutes.
.PHONY: validate
validate: $(LIB) $(TOOL) $(BUILD)/tandem $(BUILD)/udpstage
	CP_VALIDATE=1 CP_TOOL=$(abspath $(TOOL)) CP_TANDEM=$(abspath $(BUILD)/tandem) CP_UDPSTAGE=$(abspath $(BUILD)/udpstage) \
	  $(GO) test -count=1 -v -timeout 20m -run 'TestInsideVsOutside|TestCounterfactual|TestBeardChamberlainFastOperator' ./tests/capacity/ ./tests/critpath/

# The paper's ingestion result (section 4.4, Figs. 3 and 4), side by side
# (examples/testkit's IngestBench, docs/datagen.md): for Flink and for
# Storm, the same job with its sources deserializing the events (plain, the
# paper's "StormIR") and fed by the object factory ("CPIR"); gen maxrate's
# highest rate of each, the GC time per second, and the rate at the sink
# every 200 ms at a constant emission at each one's maximum. About 3
# minutes an engine; INGEST_DURATION is maxrate's run.
INGEST_DURATION ?= 5s
INGEST_PROPS = -Dcloudprofiler.bench=true -Dcloudprofiler.bench.duration=$(INGEST_DURATION) -Dsurefire.failIfNoSpecifiedTests=false
.PHONY: bench-ingest
bench-ingest: java
	cd examples/flink && $(MVN) $(JAVA_PROPS) $(INGEST_PROPS) test -Dtest=FlinkIngestBench
	cd examples/storm && $(MVN) $(JAVA_PROPS) $(INGEST_PROPS) test -Dtest=StormIngestBench

# The data generator on loopback: achieved versus target rates, and the
# maximum rates gen maxrate finds (tests/bench-gen.sh).
.PHONY: bench-gen
bench-gen: $(TOOL)
	bash tests/bench-gen.sh $(BUILD)

# The code blocks of README.md and docs/*.md (tests/docs): each says what
# tests it; the runnable ones run as written, a page at a time, in a
# directory of their own that links the repository's sources and build/
# (and the Java binding's jar, for docs/java.md's program).
.PHONY: test-docs
test-docs: build wheel java
	@$(PYENV) -c 'import numpy, pandas, pyarrow' 2>/dev/null || $(PIP) install -q numpy pandas pyarrow
	$(call with-tmp,CP_DOCS_RUN=1 $(GO) test -count=1 -v -timeout 15m ./tests/docs)

# make install PREFIX=DIR (default /usr/local; DESTDIR for staging): the
# library in DIR/lib, the header in DIR/include, the tool in DIR/bin and
# DIR/lib/pkgconfig/cloudprofiler.pc, whose Libs carry the run path, so
#   cc prog.c $(pkg-config --cflags --libs cloudprofiler)
# builds a program that starts without LD_LIBRARY_PATH (with
# PKG_CONFIG_PATH=DIR/lib/pkgconfig where pkg-config does not look by
# itself). make uninstall PREFIX=DIR removes those four files.
PREFIX  ?= /usr/local
VERSION := 0.1.0
.PHONY: install uninstall test-install
install: $(LIB) $(TOOL) capi/cloudprofiler.h capi/cloudprofiler.pc.in
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(LIB) $(DESTDIR)$(PREFIX)/lib/libcloudprofiler.so
	install -m 0644 capi/cloudprofiler.h $(DESTDIR)$(PREFIX)/include/cloudprofiler.h
	install -m 0755 $(TOOL) $(DESTDIR)$(PREFIX)/bin/cloudprofiler
	sed -e '/^#/d' -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' capi/cloudprofiler.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/cloudprofiler.pc
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/libcloudprofiler.so $(DESTDIR)$(PREFIX)/include/cloudprofiler.h \
	  $(DESTDIR)$(PREFIX)/bin/cloudprofiler $(DESTDIR)$(PREFIX)/lib/pkgconfig/cloudprofiler.pc

# make install into a new prefix, then examples/c/demo.c built with the
# compile line docs/c.md gives and run from another directory, its logs
# dumped by the installed tool; make uninstall leaves the prefix empty.
test-install: $(LIB) $(TOOL)
	$(call with-tmp,bash tests/install.sh)

clean:
	rm -rf $(BUILD)
