package scaleout

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloudprofiler/internal/analyze"
	"cloudprofiler/internal/logfile"
	"cloudprofiler/minrtt"
)

// A time range of a run as logs (export --format logs --from --to): every
// node cuts its own logs to the records whose time, translated into the
// reference clock, falls in the range, and writes them as logs again
// (logfile.CutWriter: the same headers, the source's damage said in them),
// beside a copy of the rounds. Gathered on one machine, the cuts of every
// node are what analyze reads: the critical path, Mace and capacity, which
// need every record of a span in time order, run on a range of a run too
// large for one machine (docs/spark.md). All nodes cut at the same
// reference-clock bounds: the bounds come from the rounds every node has.

// CutFormat names a cut's cut.json; CutVersion is its version.
const (
	CutFormat  = "cloudprofiler-cut"
	CutVersion = 1
)

// CutMeta is cut.json: what every node's cut into one directory agrees on.
type CutMeta struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	FromNs  int64  `json:"from_realtime_ns"` // the range, wall clock (math.MinInt64, MaxInt64: open)
	ToNs    int64  `json:"to_realtime_ns"`
	// The reference counter's bounds: records with FromCycles <= estimate
	// < ToCycles (relative to Origin) are in the range (from the rest).
	FromCycles float64 `json:"-"`
	ToCycles   float64 `json:"-"`
	Ref        string  `json:"ref"`
	Origin     uint64  `json:"origin"`
	Method     string  `json:"method"`
	Rounds     bool    `json:"rounds"`
	// ZeroNs is the wall-clock time --from and --to count seconds from:
	// the start of the first round (one node without rounds: the open of
	// its first channel), placed at the reference's first reading.
	ZeroNs int64 `json:"zero_realtime_ns"`
}

// CutResult is what a cut wrote.
type CutResult struct {
	Meta     CutMeta
	Nodes    []string
	Files    int
	Kept     uint64 // records and counter periods kept
	Read     uint64 // of those read
	Problems []*analyze.Channel
}

// rangeZero is the wall-clock time that --from and --to count seconds
// from, and the reference estimate it stands for: the first round's start
// at the reference's first reading in the rounds (the model's origin: the
// reading is in that round, within its duration of its start); with no
// rounds, the earliest channel open, exact (the sync point's TSC is the
// model's origin).
func rangeZero(rounds string, chans []*analyze.Channel) (ns int64, err error) {
	if rounds != "" {
		rounds, err := minrtt.ReadRounds(rounds)
		if err != nil {
			return 0, fmt.Errorf("rounds: %w", err)
		}
		if rounds[0].StartedNs == 0 {
			return 0, fmt.Errorf("rounds: %s has no start time (started_realtime_ns): the range cannot be placed", rounds[0].FileName())
		}
		return rounds[0].StartedNs, nil
	}
	first := -1
	for i, c := range chans {
		if first < 0 || c.Header.OpenSync.TSC < chans[first].Header.OpenSync.TSC {
			first = i
		}
	}
	if first < 0 || chans[first].Header.OpenSync.RealtimeNs == 0 {
		return 0, errors.New("the logs' headers have no open time (open_sync): the range cannot be placed")
	}
	return chans[first].Header.OpenSync.RealtimeNs, nil
}

// The wall-clock times a range end can be: nanoseconds since 1970 in an
// int64 (the ends themselves stand for an open range).
var minRangeTime, maxRangeTime = time.Unix(0, math.MinInt64+1).UTC(), time.Unix(0, math.MaxInt64-1).UTC()

// parseRangeEnd reads --from or --to: a wall-clock time (RFC 3339), or
// seconds after zero; "" is open (def).
func parseRangeEnd(flag, s string, zero, def int64) (int64, error) {
	if s == "" {
		return def, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		// UnixNano is undefined past these (it wrapped 2300 to 1715).
		if t.Before(minRangeTime) || t.After(maxRangeTime) {
			return 0, fmt.Errorf("export: --%s %s: outside the times a range can hold (%s to %s)", flag, s,
				minRangeTime.Format(time.RFC3339), maxRangeTime.Format(time.RFC3339))
		}
		return t.UnixNano(), nil
	}
	sec, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(sec) || math.IsInf(sec, 0) || math.Abs(sec) > 1e9 {
		return 0, fmt.Errorf("export: --%s %q: a wall-clock time (RFC 3339: 2026-11-28T14:03:00Z) or seconds after the first round began (120.5)", flag, s)
	}
	return zero + int64(math.Round(sec*1e9)), nil
}

// cutRange is the range from to (--from, --to) in reference cycles, of
// pr's logs with the rounds in the directory rounds.
func cutRange(pr *analyze.Prepared, rounds, from, to string) (CutMeta, error) {
	model := pr.Model()
	m := CutMeta{Format: CutFormat, Version: CutVersion, Ref: model.Ref(), Origin: model.RefOrigin(),
		Method: model.Method().String(), Rounds: rounds != ""}
	if from == "" && to == "" {
		return m, errors.New("export: --format logs cuts a time range: give --from, --to or both (the whole run: copy the logs)")
	}
	zero, err := rangeZero(rounds, pr.Channels())
	if err != nil {
		return m, fmt.Errorf("export: %w", err)
	}
	if m.FromNs, err = parseRangeEnd("from", from, zero, math.MinInt64); err != nil {
		return m, err
	}
	if m.ToNs, err = parseRangeEnd("to", to, zero, math.MaxInt64); err != nil {
		return m, err
	}
	if m.FromNs >= m.ToNs {
		return m, fmt.Errorf("export: --from %s is not before --to %s", from, to)
	}
	m.ZeroNs = zero
	hz := model.RefHz()
	cycles := func(ns int64) float64 {
		switch ns {
		case math.MinInt64:
			return math.Inf(-1)
		case math.MaxInt64:
			return math.Inf(1)
		}
		return float64(ns-zero) * 1e-9 * hz
	}
	m.FromCycles, m.ToCycles = cycles(m.FromNs), cycles(m.ToNs)
	return m, nil
}

// cutName is the cut's file name for channel i's log: its own, binary.
func cutName(chans []*analyze.Channel, i int) string {
	base := func(c *analyze.Channel) string {
		b := filepath.Base(c.Path)
		b = strings.TrimSuffix(strings.TrimSuffix(b, ".txt"), ".cplog")
		return b
	}
	n := 0
	for j := 0; j <= i; j++ {
		if chans[j].Node == chans[i].Node && base(chans[j]) == base(chans[i]) {
			n++
		}
	}
	if n > 1 {
		return fmt.Sprintf("%s-%d.cplog", base(chans[i]), n)
	}
	return base(chans[i]) + ".cplog"
}

// Cut writes cfg's logs cut to [From, To) into cfg.Out/logs/NODE/, with
// the rounds and cut.json (export --format logs).
func Cut(cfg ExportConfig) (*CutResult, error) {
	pr, unlock, err := prepareOut(cfg.Config)
	if err != nil {
		return nil, err
	}
	defer unlock()
	chans, model := pr.Channels(), pr.Model()
	meta, err := cutRange(pr, cfg.Rounds, cfg.From, cfg.To)
	if err != nil {
		return nil, err
	}
	res := &CutResult{Meta: meta}
	seen := map[string]bool{}
	for _, ch := range chans {
		if !seen[ch.Node] {
			seen[ch.Node] = true
			res.Nodes = append(res.Nodes, ch.Node)
		}
	}
	if err := checkCutDir(cfg.Out, meta); err != nil {
		return nil, err
	}
	for _, n := range res.Nodes {
		if err := os.RemoveAll(filepath.Join(cfg.Out, "logs", exportStem([]string{n}))); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
	}
	var kept, read atomic.Uint64
	span := &cycleSpan{lo: math.Inf(1), hi: math.Inf(-1)}
	// The range in each node's own counter, placed once: a record's test
	// is then a comparison of its raw reading (minrtt.ReadingRange), the
	// same test as translating it.
	ranges := make([]*minrtt.ReadingRange, len(model.Nodes()))
	for i := range chans {
		if n := pr.Node(i); ranges[n] == nil {
			ranges[n] = model.RangeIdx(n, meta.FromCycles, meta.ToCycles)
		}
	}
	err = eachOnWorkers(pr.Workers(), len(chans), func(i int) error {
		dst := filepath.Join(cfg.Out, "logs", exportStem([]string{chans[i].Node}), cutName(chans, i))
		k, r, err := cutChannel(pr, i, dst, meta, ranges[pr.Node(i)], span)
		kept.Add(k)
		read.Add(r)
		return err
	})
	if err == nil && kept.Load() == 0 {
		// A range that keeps nothing is a mistake (the wrong day, seconds
		// counted from elsewhere): say where the run is.
		err = fmt.Errorf("export: %s to %s keeps none of the %d records read", meta.FromText(), meta.ToText(), read.Load())
		if span.lo <= span.hi {
			at := func(c float64) string { return fmtNs(meta.ZeroNs + int64(c/model.RefHz()*1e9)) }
			err = fmt.Errorf("%w: the run's records lie from %s to %s (in --from and --to's seconds: %.3f to %.3f)",
				err, at(span.lo), at(span.hi), span.lo/model.RefHz(), span.hi/model.RefHz())
		}
	}
	if err != nil {
		for _, n := range res.Nodes {
			os.RemoveAll(filepath.Join(cfg.Out, "logs", exportStem([]string{n})))
		}
		os.Remove(filepath.Join(cfg.Out, "logs")) // if no other node's cut is in it
		return nil, err
	}
	res.Files, res.Kept, res.Read = len(chans), kept.Load(), read.Load()
	for _, ch := range chans {
		if len(ch.Problems) > 0 {
			res.Problems = append(res.Problems, ch)
		}
	}
	if err := copyRounds(cfg.Out, cfg.Rounds); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(meta, "", " ")
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(cfg.Out, "cut.json"), append(b, '\n')); err != nil {
		return nil, err
	}
	return res, nil
}

// checkCutDir refuses an Out that holds something else than cuts of this
// range with these rounds.
func checkCutDir(out string, meta CutMeta) error {
	b, err := os.ReadFile(filepath.Join(out, "cut.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return refuseForeignDir(out, "cut.json", "a cut writes logs/, rounds/ and cut.json")
	}
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	var old CutMeta
	if err := json.Unmarshal(b, &old); err != nil || old.Format != CutFormat || old.Version != CutVersion {
		return fmt.Errorf("export: %s: no cut of this version (%v)", filepath.Join(out, "cut.json"), err)
	}
	old.FromCycles, old.ToCycles = meta.FromCycles, meta.ToCycles // they follow from the rest
	if old != meta {
		return fmt.Errorf("export: %s holds a cut of another range or other rounds (%s to %s, reference %s, origin %d, method %s): every node's cut into one directory takes the same --from, --to, rounds, --ref and --method",
			out, fmtNs(old.FromNs), fmtNs(old.ToNs), old.Ref, old.Origin, old.Method)
	}
	return nil
}

// FromText and ToText are the range's ends for people.
func (m CutMeta) FromText() string { return fmtNs(m.FromNs) }
func (m CutMeta) ToText() string   { return fmtNs(m.ToNs) }

// fmtNs writes a range end.
func fmtNs(ns int64) string {
	switch ns {
	case math.MinInt64:
		return "the start"
	case math.MaxInt64:
		return "the end"
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// cutChannel writes channel i's records in the range (rr, its node's) to
// dst: tuple, return and FIRSTLAST records by their own time; counter
// periods by their end, with service-rate estimates by theirs; lineage
// records (no time: an output id and its input's) whole. It returns the
// records kept and read.
func cutChannel(pr *analyze.Prepared, i int, dst string, meta CutMeta, rr *minrtt.ReadingRange, span *cycleSpan) (kept, read uint64, err error) {
	c, model := pr.Channels()[i], pr.Model()
	lf, err := logfile.Open(c.Path)
	if err != nil {
		return 0, 0, err
	}
	defer lf.Close()
	node := pr.Node(i)
	// The channel's first and last counter readings, translated once at the
	// end (for the message of a range that keeps nothing).
	lo, hi := uint64(math.MaxUint64), uint64(0)
	defer func() {
		if lo <= hi {
			span.add(model.PointRelIdx(node, lo).Est, model.PointRelIdx(node, hi).Est)
		}
	}()
	in := func(tsc uint64) bool {
		lo, hi = min(lo, tsc), max(hi, tsc)
		return rr.Contains(tsc)
	}
	cut := logfile.Cut{Source: c.Path, FromNs: meta.FromNs, ToNs: meta.ToNs}
	if lf.Header.Cut != nil { // a cut of a cut: its first period began where its source's did
		cut.PeriodStartTSC = lf.Header.Cut.PeriodStartTSC
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, 0, fmt.Errorf("export: %w", err)
	}
	w, err := logfile.CreateCut(dst, lf.Header)
	if err != nil {
		return 0, 0, fmt.Errorf("export: %w", err)
	}
	switch c.Role {
	case analyze.RoleCounter:
		err = lf.Counters(func(r logfile.CounterRecord) error {
			read++
			if !in(r.TSC) {
				if kept == 0 && rr.Before(r.TSC) {
					cut.PeriodStartTSC = r.TSC // the end of a period before the range: where the first kept begins
				}
				return nil
			}
			kept++
			return w.Counter(r)
		})
		for _, e := range lf.Summary.Events {
			if err == nil && e.Rate > 0 && e.Sync != nil && in(e.Sync.TSC) {
				err = w.Event(e)
			}
		}
	default:
		err = lf.RecordBatches(func(rs []logfile.Record) error {
			read += uint64(len(rs))
			if c.Role == analyze.RoleLineage {
				// A lineage record has no time (an output id and its
				// input's): kept whole.
				kept += uint64(len(rs))
				return w.Records(rs)
			}
			// The runs of records kept go to the writer as they lie in
			// the batch, in their order; lo and hi in locals: the
			// closure's captured ones would be read and written in memory
			// for every record.
			l, h := lo, hi
			run := -1 // where the run of records kept began
			for j, r := range rs {
				l, h = min(l, r.TSC), max(h, r.TSC)
				in, sure := rr.Quick(r.TSC)
				if !sure {
					in = rr.Contains(r.TSC)
				}
				switch {
				case in && run < 0:
					run = j
				case !in && run >= 0:
					kept += uint64(j - run)
					if err := w.Records(rs[run:j]); err != nil {
						return err
					}
					run = -1
				}
			}
			lo, hi = l, h
			if run >= 0 {
				kept += uint64(len(rs) - run)
				return w.Records(rs[run:])
			}
			return nil
		})
	}
	if err = c.ReadDone(lf, err); err != nil {
		w.Abort()
		return 0, read, err
	}
	cut.Records, cut.Problems = read, c.Problems
	var t logfile.Trailer
	if lf.Summary.Trailer != nil {
		t = *lf.Summary.Trailer
	}
	if err := w.Close(cut, t); err != nil {
		return 0, read, fmt.Errorf("export: %s: %w", dst, err)
	}
	return kept, read, nil
}

// cycleSpan is the earliest and latest reference time (cycles from the
// origin) of the records a cut read, from every channel's goroutine.
type cycleSpan struct {
	mu     sync.Mutex
	lo, hi float64
}

func (s *cycleSpan) add(lo, hi float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lo, s.hi = min(s.lo, lo), max(s.hi, hi)
}
