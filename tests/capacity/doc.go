// Package capacity holds the capacity test: the C pipeline
// examples/pipeline/tandem.c (source -> A -> B -> sink, each operator
// spinning a known number of TSC cycles per tuple) runs at several loads,
// `cloudprofiler analyze` measures every operator's service rate from the
// marks it logs, and the results must match the truth the pipeline prints:
// the direct (in/out) service rates, the busy shares, the bottleneck, the
// Beard & Chamberlain estimates of its CP_SERVICERATE count channels, and
// the highest source rate the analysis predicts against what `gen maxrate`
// finds from outside. `make test-capacity` runs it (it needs build/tandem and
// build/cloudprofiler; without them, or without CP_TANDEM and CP_TOOL set,
// it skips). The package has tests only.
package capacity
