// Package analyze turns the channel logs of many nodes and the MinRTT rounds
// into durations in one reference TSC, each with a strict error bound
// (package minrtt does the arithmetic): tuple records are joined on tuple id
// across channels, and every hop of every tuple becomes a duration. It also
// reads FIRSTLAST channels (run duration), periodic counters (throughput over
// time) and FOX_START return logs (the return-trip method, for comparison).
//
// Memory is bounded: tuple records are held in memory up to a budget, then
// spilled to 64 partition files by tuple id and joined one partition at a
// time; per-pair statistics keep exact quantiles up to 2^20 durations and a
// 0.1 % histogram after that.
package analyze

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"cloudprofiler/internal/logfile"
	"cloudprofiler/minrtt"
)

// Config is one analysis.
type Config struct {
	Rounds      string   // directory of round-*.json (tsc-server --out)
	Logs        []string // directories (walked) or channel files
	Out         string   // output directory, created
	Ref         string   // reference node; "" lets minrtt choose
	Method      minrtt.Method
	Order       []string // channel order of the topology ("node/name" or "name"), first to last; the rest ranked from the data (order.go)
	MemEvents   int      // tuple records held in memory before spilling (default 8M, ~256 MiB)
	NoDurations bool     // skip durations.csv (summaries only)
}

// Incomplete lists the channels whose files are damaged or miss records
// they accepted (their valid records were analysed).
func (r *Result) Incomplete() []*Channel {
	var out []*Channel
	for _, c := range r.Channels {
		if len(c.Problems) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// maxTupleEvents is the most records one tuple id may have; an id seen more
// often is reused (not one tuple's way) and is left out, and said so.
const maxTupleEvents = 4096

// Kinds of duration.
const (
	KindCompute   = "compute"    // two channels of one process: work inside an actor
	KindTransfer  = "transfer"   // channels of two processes: actor to actor
	KindEndToEnd  = "end_to_end" // a tuple's first channel to its last (3 or more channels)
	KindReturnRTT = "return_trip"
)

// PairKey names the channels a duration runs between.
type PairKey struct {
	Kind     string
	From, To int // channel indices
}

// PairStats is the summary of one pair's durations, in reference cycles.
type PairStats struct {
	Key             PairKey
	Dur, Err        *Stats
	Paper, Baseline *Stats
	Scenarios       [4]uint64
	// return_trip only (Key.To is the tuple's last channel): the return-trip
	// duration minus ours from start to that channel, and our bound there.
	RetErr, OursErr *Stats
}

// Result is what Run found; the files in Out say the same at length.
type Result struct {
	Ref       string
	RefHz     float64
	Channels  []*Channel
	Records   uint64 // tuple records read
	Tuples    uint64 // distinct tuple ids joined
	Durations uint64
	Spilled   uint64 // records that went through the spill files
	// Tuple ids with more than maxTupleEvents records (reused ids): left out.
	SkippedTuples, SkippedRecords uint64
	Pairs                         []*PairStats
	Order                         []string // channel labels in the order hops follow
	Runs                          []RunSpan
	Files                         []string
}

type analysis struct {
	cfg   Config
	model *minrtt.Model
	res   *Result
	chans []*Channel
	pairs map[PairKey]*PairStats
	out   *bufio.Writer
	row   []byte
	t0    float64     // earliest reference estimate seen: time zero of the reports
	retOf map[int]int // return-log channel -> its FOX_START channel
	rank  []int       // channel -> its place in the hop order (order.go)
	// counter channel -> its periods (throughput.csv), for the report
	throughput map[int][]ThroughputPoint
}

// Run performs the analysis and writes its files into cfg.Out.
func Run(cfg Config) (*Result, error) {
	if len(cfg.Logs) == 0 || cfg.Out == "" {
		return nil, errors.New("analyze: --logs and --out are required (and --rounds when the logs come from several nodes)")
	}
	if cfg.MemEvents <= 0 {
		cfg.MemEvents = 8 << 20
	}
	chans, err := findChannels(cfg.Logs)
	if err != nil {
		return nil, err
	}
	model, err := buildModel(cfg, chans)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, n := range model.Nodes() {
		known[n] = true
	}
	for _, c := range chans {
		c.node = model.NodeIndex(c.Node)
		if !known[c.Node] {
			return nil, fmt.Errorf("%s: channel %q is on node %q, which no round measured (nodes in the rounds: %s); set CP_NODE to the name given to tsc-client --node",
				c.Path, c.Name, c.Node, strings.Join(model.Nodes(), ", "))
		}
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, err
	}
	a := &analysis{cfg: cfg, model: model, chans: chans, pairs: map[PairKey]*PairStats{}, t0: math.Inf(1),
		res: &Result{Ref: model.Ref(), RefHz: model.RefHz(), Channels: chans}}
	a.linkReturnLogs()
	if err := a.joinTuples(); err != nil {
		return nil, err
	}
	if err := a.runSpans(); err != nil {
		return nil, err
	}
	if err := a.writeThroughput(); err != nil {
		return nil, err
	}
	for _, p := range a.pairs {
		a.res.Pairs = append(a.res.Pairs, p)
	}
	sort.Slice(a.res.Pairs, func(i, j int) bool { return a.less(a.res.Pairs[i].Key, a.res.Pairs[j].Key) })
	if err := a.writeSummaries(); err != nil {
		return nil, err
	}
	return a.res, nil
}

// buildModel translates every node's TSC into the reference's: from the
// rounds; or, with no --rounds and every log from one node, that node's own
// counter (exact: no translation is needed inside one machine).
func buildModel(cfg Config, chans []*Channel) (*minrtt.Model, error) {
	if cfg.Rounds == "" {
		nodes := map[string]bool{}
		var names []string
		for _, c := range chans {
			if !nodes[c.Node] {
				nodes[c.Node] = true
				names = append(names, c.Node)
			}
		}
		if len(names) != 1 {
			sort.Strings(names)
			return nil, fmt.Errorf("analyze: the logs come from %d nodes (%s): --rounds (tsc-server --out) is required to translate between them",
				len(names), strings.Join(names, ", "))
		}
		if cfg.Ref != "" && cfg.Ref != names[0] {
			return nil, fmt.Errorf("analyze: reference node %q: the logs come from node %q only", cfg.Ref, names[0])
		}
		origin, hz := uint64(0), 0.0
		for i, c := range chans {
			if o := c.Header.OpenSync.TSC; i == 0 || o < origin {
				origin = o
			}
			if c.Hz > 0 {
				hz = c.Hz
			}
		}
		return minrtt.NewSingleNodeModel(names[0], hz, origin, cfg.Method)
	}
	rounds, err := minrtt.ReadRounds(cfg.Rounds)
	if err != nil {
		return nil, fmt.Errorf("rounds: %w", err)
	}
	model, err := minrtt.NewModel(rounds, minrtt.Options{Ref: cfg.Ref, Method: cfg.Method})
	if err != nil {
		return nil, fmt.Errorf("rounds: %w", err)
	}
	return model, nil
}

func kindRank(k string) int {
	switch k {
	case KindCompute:
		return 0
	case KindTransfer:
		return 1
	case KindEndToEnd:
		return 2
	}
	return 3
}

func (a *analysis) less(x, y PairKey) bool {
	if kindRank(x.Kind) != kindRank(y.Kind) {
		return kindRank(x.Kind) < kindRank(y.Kind)
	}
	if x.From != y.From {
		return a.chans[x.From].Label() < a.chans[y.From].Label()
	}
	return a.chans[x.To].Label() < a.chans[y.To].Label()
}

// linkReturnLogs pairs each FOX_START return log with the FOX_START channel
// of the same process and name.
func (a *analysis) linkReturnLogs() {
	a.retOf = map[int]int{}
	for i, r := range a.chans {
		if r.Role != RoleReturn {
			continue
		}
		for j, s := range a.chans {
			if s.Role == RoleTuples && s.Handler == "FOX_START" && s.Node == r.Node && s.PID == r.PID && s.Name == r.Name {
				a.retOf[i] = j
			}
		}
	}
}

func (a *analysis) joinTuples() error {
	j := newJoiner(filepath.Join(a.cfg.Out, ".spill"), a.cfg.MemEvents)
	defer j.close()
	for i, c := range a.chans {
		if c.Role != RoleTuples && c.Role != RoleReturn {
			continue
		}
		lf, err := logfile.Open(c.Path)
		if err != nil {
			return err
		}
		err = lf.Records(func(r logfile.Record) error {
			a.res.Records++
			return j.add(event{id: r.TupleID, tsc: r.TSC, ch: uint32(i)})
		})
		err = c.readDone(lf, err)
		lf.Close()
		if err != nil {
			return err
		}
	}
	a.res.Spilled = j.spilled
	if !a.cfg.NoDurations {
		f, err := os.Create(filepath.Join(a.cfg.Out, "durations.csv"))
		if err != nil {
			return err
		}
		defer f.Close()
		a.out = bufio.NewWriterSize(f, 1<<20)
		a.out.WriteString("tuple_id,from_node,from_channel,to_node,to_channel,kind,start_tsc,end_tsc," +
			"cycles,error_cycles,seconds,error_seconds,scenario,paper_error_cycles,baseline_error_cycles\n")
		a.res.Files = append(a.res.Files, f.Name())
	}
	fill := func(evs []event) {
		for k := range evs {
			e := &evs[k]
			v := a.model.PointRelIdx(a.chans[e.ch].node, e.tsc)
			e.est, e.err = v.Est, v.Err
			a.t0 = math.Min(a.t0, v.Est)
		}
	}
	// First pass: the channel order (order.go).
	ov := orderVotes{}
	err := j.each(fill, func(evs []event) error {
		for s := 0; s < len(evs); {
			e := s + 1
			for e < len(evs) && evs[e].id == evs[s].id {
				e++
			}
			a.vote(ov, evs[s:e])
			s = e
		}
		return nil
	})
	if err != nil {
		return err
	}
	if a.rank, err = a.rankChannels(ov); err != nil {
		return err
	}
	byRank := make([]int, len(a.chans))
	for i, r := range a.rank {
		byRank[r] = i
	}
	for _, i := range byRank {
		if a.chans[i].Role == RoleTuples {
			a.res.Order = append(a.res.Order, a.chans[i].Label())
		}
	}
	// Second pass: the durations.
	err = j.each(fill, func(evs []event) error {
		for s := 0; s < len(evs); {
			e := s + 1
			for e < len(evs) && evs[e].id == evs[s].id {
				e++
			}
			a.res.Tuples++
			if err := a.tuple(evs[s:e]); err != nil {
				return err
			}
			s = e
		}
		return nil
	})
	if err != nil {
		return err
	}
	if a.out != nil {
		return a.out.Flush()
	}
	return nil
}

// tuple turns one tuple's events into durations: every hop between
// consecutive channels in the channel order (events of one channel by
// their estimate), first to last when the tuple crossed three or more
// channels, and the return trip when a FOX_START channel heard the tuple's
// ReTACK.
func (a *analysis) tuple(evs []event) error {
	if len(evs) > maxTupleEvents {
		// A reused id (a channel logging a constant, say) is no tuple's way.
		a.res.SkippedTuples++
		a.res.SkippedRecords += uint64(len(evs))
		return nil
	}
	var path [64]event
	hops := path[:0]
	var rets []event
	for _, e := range evs {
		if a.chans[e.ch].Role == RoleReturn {
			rets = append(rets, e)
		} else {
			hops = append(hops, e)
		}
	}
	// evs are sorted by estimate: a stable sort by rank keeps that within
	// a channel.
	slices.SortStableFunc(hops, func(x, y event) int { return a.rank[x.ch] - a.rank[y.ch] })
	for i := 1; i < len(hops); i++ {
		x, y := hops[i-1], hops[i]
		kind := KindTransfer
		if cx, cy := a.chans[x.ch], a.chans[y.ch]; cx.Node == cy.Node && cx.PID == cy.PID {
			kind = KindCompute
		}
		if _, err := a.duration(kind, x, y, nil, -1); err != nil {
			return err
		}
	}
	if len(hops) >= 3 {
		if _, err := a.duration(KindEndToEnd, hops[0], hops[len(hops)-1], nil, -1); err != nil {
			return err
		}
	}
	for _, r := range rets {
		start, ok := a.retOf[int(r.ch)]
		if !ok {
			continue
		}
		// The return trip runs from the tuple's start on the FOX_START
		// channel to the ReTACK's arrival there; the method takes it for the
		// tuple's latency to its last channel, which it overestimates by
		// the ReTACK's transfer time. Ours is the start-to-end duration.
		var s, end *event
		for k := range hops {
			if int(hops[k].ch) == start && s == nil {
				s = &hops[k]
			}
		}
		if s == nil || len(hops) < 2 {
			continue
		}
		end = &hops[len(hops)-1]
		ours := a.model.DurationIdx(a.chans[s.ch].node, s.tsc, a.chans[end.ch].node, end.tsc)
		if _, err := a.duration(KindReturnRTT, *s, r, &ours, int(end.ch)); err != nil {
			return err
		}
	}
	return nil
}

// duration computes, records and writes one duration from x to y. For a
// return trip, ours is the start-to-end duration the ReT method estimates
// and keyTo the end's channel, under which the pair is summarised.
func (a *analysis) duration(kind string, x, y event, ours *minrtt.Duration, keyTo int) (minrtt.Duration, error) {
	cx, cy := a.chans[x.ch], a.chans[y.ch]
	d := a.model.DurationIdx(cx.node, x.tsc, cy.node, y.tsc)
	key := PairKey{kind, int(x.ch), int(y.ch)}
	if keyTo >= 0 {
		key.To = keyTo
	}
	p := a.pairs[key]
	if p == nil {
		// Only the durations get exact quantiles: the bounds are
		// reported by min, median and max, and 0.1 % is plenty there.
		p = &PairStats{Key: key, Dur: newStats(), Err: newStatsLimit(0), Paper: newStatsLimit(0), Baseline: newStatsLimit(0)}
		if ours != nil {
			p.RetErr, p.OursErr = newStats(), newStatsLimit(0)
		}
		a.pairs[key] = p
	}
	p.Dur.Add(d.Est)
	p.Err.Add(d.Err)
	p.Paper.Add(d.Paper)
	p.Baseline.Add(d.Baseline)
	if d.Scenario >= 0 && d.Scenario < 4 {
		p.Scenarios[d.Scenario]++
	}
	if ours != nil {
		p.RetErr.Add(d.Est - ours.Est)
		p.OursErr.Add(ours.Err)
	}
	a.res.Durations++
	if a.out != nil {
		hz := a.model.RefHz()
		b := a.row[:0]
		b = strconv.AppendInt(b, x.id, 10)
		b = appendCSV(b, cx.Node)
		b = appendCSV(b, cx.Name)
		b = appendCSV(b, cy.Node)
		b = appendCSV(b, cy.Name)
		b = append(b, ',')
		b = append(b, kind...)
		b = append(b, ',')
		b = strconv.AppendUint(b, x.tsc, 10)
		b = append(b, ',')
		b = strconv.AppendUint(b, y.tsc, 10)
		// Shortest exact form ('g', -1): a rounded bound could exclude the truth.
		for _, v := range []float64{d.Est, d.Err, d.Est / hz, d.Err / hz} {
			b = append(b, ',')
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(d.Scenario), 10)
		for _, v := range []float64{d.Paper, d.Baseline} {
			b = append(b, ',')
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
		b = append(b, '\n')
		a.row = b
		if _, err := a.out.Write(b); err != nil {
			return d, err
		}
	}
	return d, nil
}

// appendCSV appends ",field", quoted when it needs to be.
func appendCSV(b []byte, s string) []byte {
	b = append(b, ',')
	if !strings.ContainsAny(s, ",\"\n\r") {
		return append(b, s...)
	}
	b = append(b, '"')
	b = append(b, strings.ReplaceAll(s, `"`, `""`)...)
	return append(b, '"')
}

func writeFile(path string, fn func(w io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	err = fn(w)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
