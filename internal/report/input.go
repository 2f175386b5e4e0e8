// Package report shows a run's results to people: summary.txt, the table
// and the analyses' texts, and report.html, one page of charts and tables.
// Both open with the verdict (verdict.go), the answers an engineer came
// for, worked out once from the analyses' results.
//
// The pipeline (internal/analyze) runs the analyses and hands their
// results here in an Input; this package imports none of the pipeline,
// only the analyses' result types (capacity, critical path, Mace, the
// clock model's links) and the chart drawer. It computes no statistic of
// its own from records: every number it shows is in its Input.
package report

import (
	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/critpath"
	"cloudprofiler/internal/mace"
	"cloudprofiler/minrtt"
)

// Kinds of duration, as the pipeline names its pairs.
const (
	KindCompute   = "compute"    // two channels of one process: work inside an actor
	KindTransfer  = "transfer"   // channels of two processes: actor to actor
	KindEndToEnd  = "end_to_end" // a tuple's first channel to its last (3 or more channels)
	KindReturnRTT = "return_trip"
)

// Row is one line of the summary: a pair's durations in seconds.
type Row struct {
	Kind, From, To                  string
	Count                           uint64
	Min, P25, Median, P75, P99, Max float64 // duration, seconds
	ErrMin, ErrMedian, ErrMax       float64 // bound, seconds
	PaperMedian, BaselineMedian     float64 // the paper's and the baseline's bounds, seconds
	RetErrMedian, RetErrMax         float64 // return_trip: ReT minus ours, seconds
	OursErrMedian                   float64 // return_trip: our bound on the start-to-end duration, seconds
	Scenarios                       [4]uint64
	Exact                           bool
}

// Input is what the report shows: the run, its pairs' statistics and the
// analyses' results. The fields under "the page" are needed by
// report.html only; WriteText and Verdict read the others.
type Input struct {
	Ref                        string  // the reference node
	RefHz                      float64 // its registered TSC frequency: cycles to seconds
	Records, Tuples, Durations uint64
	// Tuple ids left out for having more than MaxTupleRecords records.
	SkippedTuples, SkippedRecords uint64
	MaxTupleRecords               int
	SkippedFiles                  []string // what the logs' directories held that is no log, a sentence each
	// Lineage channels read, their records, and the output ids followed.
	LineageChannels              int
	LineagePairs, LineageOutputs uint64
	Order                        []string // channel labels in the order hops follow
	Channels                     []Channel
	Pairs                        []Pair // in the summary's order
	Runs                         []Run
	// Each analysis's result, or nil and a note that says why not.
	Capacity     *capacity.Result
	CapacityNote string
	CritPath     *critpath.Result
	CritPathNote string
	Mace         *mace.Result
	MaceNote     string

	// The page.
	Nodes    []string // the clock model's nodes, the reference among them
	Links    []minrtt.Link
	Method   string   // how durations across nodes were bounded
	Threads  []Thread // the topology's boxes: operator instances, or channels outside any
	Timeline Timeline
	Counters []Counter // periodic counter channels, in the channels' order
}

// Channel is one log file.
type Channel struct {
	Label, Path string
	Problems    []string // what is damaged or missing in its file
	Tuples      bool     // it logs (tuple id, TSC) records joined across channels
	Counter     bool     // it is a periodic counter
	// The page.
	HasRecords bool // it holds tuple records
	Rank       int  // its place in the hop order
	Thread     int  // its box in the topology (Input.Threads)
	// The operator instance it marks, and which mark ("" and RoleNone:
	// none; the capacity analysis's naming).
	Operator, Instance string
	Role               capacity.Role
	// TupleCounts are its tuple records per bucket of the timeline (nil:
	// none).
	TupleCounts []uint64
}

// Pair is the statistics of the durations between two channels.
type Pair struct {
	Row
	FromChannel, ToChannel int // indices into Input.Channels
	// CDF is the durations' quantiles at CDFProbs, seconds (the page's
	// distributions); nil: not drawn.
	CDF []float64
	// OverTime is the durations per bucket of the timeline that holds any
	// (nil: not kept, past the memory allowed for them).
	OverTime []Bucket
}

// CDFProbs are the probabilities a distribution is drawn at, denser in the
// tail.
var CDFProbs = []float64{0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7,
	0.75, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99, 0.995, 0.998, 0.999, 0.9995, 0.9999}

// Bucket is one bucket of a pair's durations over time, seconds.
type Bucket struct {
	Index         int
	P50, P99, Max float64
}

// Timeline is the run cut into buckets from its first tuple record, by
// each duration's start.
type Timeline struct {
	On      bool    // kept (the page's aggregates were asked for)
	Buckets int     // how many
	Width   float64 // one bucket, seconds
	Dropped int64   // pairs left without a line over time (past the memory for them)
}

// Thread is a box of the topology: an operator instance, or a channel
// outside any, on its node (an index into Input.Nodes).
type Thread struct {
	Name string
	Node int
}

// Counter is a periodic counter channel's periods.
type Counter struct {
	Channel int // index into Input.Channels
	Points  []CounterPoint
}

// CounterPoint is one period: its end, seconds from the run's first tuple
// record, its length, and what it counted.
type CounterPoint struct {
	T, Period float64
	Count     uint64
}

// Run is the duration of a run, from a FIRSTLAST channel.
type Run struct {
	Channel         string
	FirstID, LastID int64
	Seconds, Bound  float64
}

// Incomplete are the channels whose files are damaged or miss records.
func (in *Input) Incomplete() []*Channel {
	var out []*Channel
	for i := range in.Channels {
		if len(in.Channels[i].Problems) > 0 {
			out = append(out, &in.Channels[i])
		}
	}
	return out
}

// Rows are the pairs' summary lines.
func (in *Input) Rows() []Row {
	rows := make([]Row, len(in.Pairs))
	for i := range in.Pairs {
		rows[i] = in.Pairs[i].Row
	}
	return rows
}
