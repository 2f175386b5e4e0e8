// Package multinode holds the multi-node test: several network namespaces on
// one machine play the nodes of a stream processing cluster, each with its
// own fake TSC (CP_FAKE_TSC), a TSC server and clients measure them, a C
// pipeline logs tuples across them, and `cloudprofiler analyze` must bound
// every duration it reports around the exactly known truth. It needs root;
// `make test-multinode` runs it. The package has tests only.
package multinode
