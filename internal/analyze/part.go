package analyze

import (
	"bufio"
	"encoding/binary"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/cost"
	"cloudprofiler/internal/logfile"
	"cloudprofiler/minrtt"

	"github.com/parquet-go/parquet-go"
)

// The analysis of an export (export.go) a partition at a time, for a
// distributed engine to schedule (Apache Spark: docs/spark.md, the Python
// package's cloudprofiler.spark): RunPart joins one partition's records
// exactly as analyze joins one of its own partitions (the same worker, the
// same code) and writes the partition's durations and a state: its order
// votes, its per-pair statistics and its counts. MergeParts merges the
// states, as analyze merges its workers, and writes the summaries. Like
// analyze, the driver first asks a sample of the partitions for votes only
// (PartConfig.Rank nil), takes the order they give (MergeParts' Rank),
// joins every partition with it, and joins again with the order of all
// votes where that differs (MergeParts says so: ErrOtherOrder).

// PartConfig is one partition's join.
type PartConfig struct {
	Export  string   // the export's directory: export.json, channels/, rounds/ (the records need not be there)
	Records []string // the partition's Parquet files (ExportRow's columns; others ignored)
	// Rank is the channel order: each channel's place (channels numbered
	// as channels/*.json list them; MergeParts' Rank); nil: votes only,
	// no durations.
	Rank      []int
	Durations string // write the partition's durations here (Parquet; "": none)
	State     string // write the partition's state here
	Partition int    // the export partition (a check: every record must hash to it); -1: not checked
	MemBytes  int64
	Window    time.Duration // capacity's windows (0: DefaultWindow; the states carry them to MergeParts)
	// NoCapacity: no capacity sums (as analyze --no-capacity).
	NoCapacity bool
}

// partExactBound: a partition keeps no exact values of a pair whose
// channels both hold more records than this in the whole export (RunPart;
// a variable for tests, which cannot make 2^20 records a pair quickly).
var partExactBound uint64 = exactLimit

// noWalkOnPartitions is why capacity has no cost model on an export's
// partitions.
const noWalkOnPartitions = "on partitions: the cost model walks each instance's visits in time order; analyze a time range for it, export --format logs"

// partStateVersion is the state's format; MergeParts refuses another.
const partStateVersion = 4 // 2: capacity's sums; 3: the partitions it holds; 4: exact values as raw bytes (floatColumn), Min and Max as bits

// partState is what RunPart leaves for MergeParts (gob).
type partState struct {
	Version  int
	Channels []string // channel keys in index order: both sides must number alike
	Rank     []int    // the order joined with (nil: votes only)
	// Parts are the export partitions whose records it holds, each whole
	// (join-part checked them against the export's counts), in order:
	// MergeParts takes each partition once and wants every one.
	Parts []int
	Records, Tuples, Durations,
	SkippedTuples, SkippedRecords uint64
	T0       float64
	Votes    []voteState
	Pairs    []pairState
	Capacity *capacity.AccState // nil: no capacity analysis
}

type voteState struct {
	A, B         uint32
	Sure, Likely [2]uint64
}

type pairState struct {
	Kind            string
	From, To        int
	Dur, Err        statsState
	Paper, Baseline statsState
	Scenarios       [4]uint64
	RetErr, OursErr *statsState
}

// statsState is a Stats with every field exported (gob).
type statsState struct {
	N, Limit uint64
	// Min and Max as math.Float64bits: gob leaves out a field equal to
	// zero, and -0.0 == 0, so a minimum of -0 came back as +0.
	Min, Max   uint64
	Exact      floatColumn
	Zero       uint64
	Lo         int32
	Counts     []uint64
	Far        map[int32]uint64
	Past, Used bool // Used: Exact is non-nil (gob drops empty slices)
}

func (s *Stats) state() statsState {
	s.flush()
	return statsState{N: s.N, Limit: s.limit, Min: math.Float64bits(s.Min), Max: math.Float64bits(s.Max), Exact: s.exact, Zero: s.zero, Lo: s.lo,
		Counts: s.counts, Far: s.far, Past: s.past, Used: s.exact != nil}
}

func (st *statsState) stats() *Stats {
	s := &Stats{N: st.N, limit: st.Limit, Min: math.Float64frombits(st.Min), Max: math.Float64frombits(st.Max), zero: st.Zero, lo: st.Lo,
		counts: st.Counts, far: st.Far, past: st.Past}
	if st.Used { // a non-nil list, even empty: exact values kept
		s.exact = st.Exact
		if s.exact == nil {
			s.exact = []float64{}
		}
	}
	return s
}

// floatColumn is a []float64 that gob carries as its raw bytes, 8 a value,
// little endian. Gob's own encoding of a float reverses its bytes into a
// varint, one value at a time: 15 % of a partition's join went to the
// state's exact values that way (100M records in 64 partitions: about
// 390,000 a pair in each).
type floatColumn []float64

func (f floatColumn) GobEncode() ([]byte, error) {
	b := make([]byte, 8*len(f))
	for i, v := range f {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return b, nil
}

func (f *floatColumn) GobDecode(b []byte) error {
	if len(b)%8 != 0 {
		return fmt.Errorf("a column of %d bytes, not 8 a value", len(b))
	}
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	*f = out
	return nil
}

// exportAnalysis is the analysis of an export's partitions, with each
// channel's key (ExportRow.ChannelKey).
type exportAnalysis struct {
	*analysis
	keys  []string
	parts []map[int]uint64 // each channel's records in each partition (ExportChannel.Parts)
	// meta[i] is the channels/*.json file that lists channel i.
	meta []string
}

// prepareExport is prepare for an export's partitions: the channels from
// channels/*.json (in the order of their files, then as listed), the
// model from rounds/.
func prepareExport(cfg Config, dir string) (*exportAnalysis, *ExportMeta, error) {
	meta, err := readExportMeta(dir)
	if err != nil {
		return nil, nil, err
	}
	metas, _ := filepath.Glob(filepath.Join(dir, "channels", "*.json"))
	sort.Strings(metas)
	if len(metas) == 0 {
		return nil, nil, fmt.Errorf("export %s: no channels/*.json (an export writes one per node set it read)", dir)
	}
	var chans []*Channel
	var keys, labels, listedIn []string
	var parts []map[int]uint64
	listed := map[string]string{} // channel key -> the channels/*.json listing it
	type span struct{ lo, hi uint64 }
	var spans []*span
	for _, m := range metas {
		b, err := os.ReadFile(m)
		if err != nil {
			return nil, nil, err
		}
		var ec ExportChannels
		if err := json.Unmarshal(b, &ec); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", m, err)
		}
		for _, c := range ec.Channels {
			var h logfile.Header
			if err := json.Unmarshal(c.Header, &h); err != nil {
				return nil, nil, fmt.Errorf("%s: channel %s: header: %w", m, c.Label, err)
			}
			path := c.Path
			if c.Copy != "" {
				path = filepath.Join(dir, filepath.FromSlash(c.Copy))
			}
			ch := channelOf(path, h, c.Records)
			ch.Problems = c.Problems
			if other, ok := listed[c.Key]; ok {
				return nil, nil, fmt.Errorf("export %s: channel %s is in %s and in %s: its node was exported into this directory twice (two exports at once, or node sets that overlap); export into a new directory", dir, c.Key, filepath.Base(other), filepath.Base(m))
			}
			listed[c.Key] = m
			var inParts uint64
			for p, n := range c.Parts {
				if p < 0 || p >= meta.Partitions {
					return nil, nil, fmt.Errorf("%s: channel %s has records in partition %d; export.json says %d partitions", m, c.Key, p, meta.Partitions)
				}
				inParts += n
			}
			if inParts != c.Records {
				return nil, nil, fmt.Errorf("%s: channel %s: %d records, %d in its partitions (parts): the file was changed after the export", m, c.Key, c.Records, inParts)
			}
			chans = append(chans, ch)
			labels = append(labels, c.Label)
			keys = append(keys, c.Key)
			parts = append(parts, c.Parts)
			listedIn = append(listedIn, m)
			var sp *span
			if c.TSCMin != nil && c.TSCMax != nil {
				sp = &span{*c.TSCMin, *c.TSCMax}
			}
			spans = append(spans, sp)
		}
	}
	labelProcesses(chans)
	for i, ch := range chans {
		if ch.Label() != labels[i] {
			return nil, nil, fmt.Errorf("%s: channel %s: its header names %s", listedIn[i], labels[i], ch.Label())
		}
	}
	cfg.Ref = meta.Ref
	switch meta.Method {
	case minrtt.MethodBest.String():
		cfg.Method = minrtt.MethodBest
	case minrtt.MethodPaper.String():
		cfg.Method = minrtt.MethodPaper
	case minrtt.MethodAllProbes.String():
		cfg.Method = minrtt.MethodAllProbes
	default:
		return nil, nil, fmt.Errorf("%s: method %q", filepath.Join(dir, "export.json"), meta.Method)
	}
	cfg.Rounds = ""
	if meta.Rounds {
		cfg.Rounds = filepath.Join(dir, "rounds")
	}
	model, _, err := buildModel(cfg, chans)
	if err != nil {
		return nil, nil, err
	}
	if model.RefOrigin() != meta.Origin {
		return nil, nil, fmt.Errorf("export %s: its rounds give origin %d, export.json says %d: rounds/ changed after the export", dir, model.RefOrigin(), meta.Origin)
	}
	for _, c := range chans {
		c.node = model.NodeIndex(c.Node)
		if c.node < 0 {
			return nil, nil, fmt.Errorf("export %s: channel %s is on node %s, which its rounds do not measure", dir, c.Label(), c.Node)
		}
	}
	// Capacity runs without its cost model (the walk of each instance's
	// visits in time order: not on partitions); the critical path and
	// Mace not at all (MergeParts says so).
	cfg.NoCriticalPath, cfg.NoMace, cfg.NoReport = true, true, true
	if cfg.MemBytes <= 0 {
		cfg.MemBytes = 256 << 20
	}
	cfg.Workers = 1
	if err := checkCapacityConfig(&cfg); err != nil {
		return nil, nil, err
	}
	a, err := newAnalysis(cfg, model, chans, &Result{})
	if err != nil {
		return nil, nil, err
	}
	for i, sp := range spans {
		if sp != nil {
			a.tscMin[i], a.tscMax[i] = sp.lo, sp.hi
		}
		// As decode sets it: capacity reads such a channel's instance as
		// analyze does (no order-of-marks reading; its busy share the cost
		// model's, which partitions have not: none).
		a.notesWaits[i] = chans[i].Header.Waits != ""
	}
	if err := a.capacityWindows(); err != nil {
		return nil, nil, err
	}
	a.noCostModel = noWalkOnPartitions
	return &exportAnalysis{a, keys, parts, listedIn}, meta, nil
}

// readExportMeta reads dir/export.json.
func readExportMeta(dir string) (*ExportMeta, error) {
	b, err := os.ReadFile(filepath.Join(dir, "export.json"))
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", dir, err)
	}
	var meta ExportMeta
	if err := json.Unmarshal(b, &meta); err != nil || meta.Format != ExportFormat {
		return nil, fmt.Errorf("%s: no cloudprofiler export (%v)", filepath.Join(dir, "export.json"), err)
	}
	if meta.Version != ExportVersion {
		return nil, fmt.Errorf("%s: export version %d; this cloudprofiler reads version %d (export again with it)", filepath.Join(dir, "export.json"), meta.Version, ExportVersion)
	}
	return &meta, nil
}

// RunPart joins one export partition (PartConfig).
func RunPart(cfg PartConfig) error {
	a, meta, err := prepareExport(Config{MemBytes: cfg.MemBytes, Window: cfg.Window, NoCapacity: cfg.NoCapacity}, cfg.Export)
	if err != nil {
		return err
	}
	byKey := map[string]uint32{}
	for i, k := range a.keys {
		byKey[k] = uint32(i)
	}
	// The partition's records, a channel's together in the order they come
	// (an export writes a channel's records in the order it logged them),
	// channels in index order: as partitions.read gives analyze's.
	type rec struct {
		id  int64
		tsc uint64
	}
	// Each channel's records here, as many as the export says it wrote into
	// the partition (cfg.Partition; all of them when it is not given),
	// allocated at once: grown a record at a time, the copies and the
	// garbage collector's work on them took half of a partition's time.
	perCh := make([][]rec, len(a.chans))
	for ch := range perCh {
		var want uint64
		for p, n := range a.parts[ch] {
			if cfg.Partition < 0 || p == cfg.Partition {
				want += n
			}
		}
		perCh[ch] = make([]rec, 0, want)
	}
	shift := uint(64 - bits.TrailingZeros(uint(meta.Partitions)))
	// Each channel's records read in each partition, to hold against the
	// export's counts (the records of a partition come mostly together).
	read := map[int][]uint64{}
	lastPart, cur := -1, []uint64(nil)
	var n int
	key := func(b []byte) (uint32, error) {
		ch, ok := byKey[string(b)]
		if !ok {
			return 0, fmt.Errorf("a record of channel %q, which the export's channels/*.json do not list", b)
		}
		return ch, nil
	}
	for _, f := range cfg.Records {
		err := readPartRecords(f, key, func(ids, tscs []int64, chs []uint32) error {
			for i, id := range ids {
				p := hashPartition(id, shift)
				if cfg.Partition >= 0 && p != cfg.Partition {
					return fmt.Errorf("tuple id %d belongs to partition %d, not %d: the records are not this partition's",
						id, p, cfg.Partition)
				}
				if p != lastPart {
					if cur = read[p]; cur == nil {
						cur = make([]uint64, len(a.chans))
						read[p] = cur
					}
					lastPart = p
				}
				cur[chs[i]]++
				perCh[chs[i]] = append(perCh[chs[i]], rec{id, uint64(tscs[i])})
			}
			n += len(ids)
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	if cfg.Partition >= 0 && read[cfg.Partition] == nil {
		read[cfg.Partition] = make([]uint64, len(a.chans))
	}
	held, err := a.checkPartCounts(read, cfg.Records)
	if err != nil {
		return err
	}
	var d partData
	d.id, d.tsc, d.ch = make([]int64, 0, n), make([]uint64, 0, n), make([]uint32, 0, n)
	for ch, rows := range perCh {
		for _, r := range rows {
			d.id, d.tsc, d.ch = append(d.id, r.id), append(d.tsc, r.tsc), append(d.ch, uint32(ch))
		}
	}
	perCh = nil
	rank := cfg.Rank
	if rank != nil {
		seen := make([]bool, len(a.chans))
		for _, r := range rank {
			if r < 0 || r >= len(seen) || seen[r] {
				rank = nil
				break
			}
			seen[r] = true
		}
		if len(rank) != len(a.chans) {
			return fmt.Errorf("the channel order %v is no order of the export's %d channels (merge-parts gives one)", cfg.Rank, len(a.chans))
		}
	}
	var rows *rowBatcher
	var dw *durationWriter
	if rank != nil && cfg.Durations != "" {
		s, err := newParquetSink(cfg.Durations, 1)
		if err != nil {
			return err
		}
		dw = newDurationWriter(1, []rowSink{s})
		rows = dw.batcher(a.analysis)
	}
	if rank != nil {
		a.resetSeriesBudget()
	}
	// A pair whose channels hold more than exactLimit records each in the
	// whole export (each of its durations takes a record of both) keeps no
	// exact values here: in the end it almost surely has more durations than
	// that, and its quantiles come from the merged histograms, as analyze's
	// do. Exact values kept in every partition only to be dropped at the
	// merge made most of a state's bytes (765 MB over 64 partitions of 100M
	// records), which Spark moves through its shuffle. Where the pair has
	// fewer in the end (most of its tuples lost), its quantiles are still
	// the histograms' (summary.csv's quantiles column says so), where
	// analyze's would be exact: docs/spark.md.
	total := make([]uint64, len(a.chans))
	for ch, ps := range a.parts {
		for _, n := range ps {
			total[ch] += n
		}
	}
	a.keptFrom = func(k PairKey) uint64 {
		if k.From >= 0 && k.From < len(total) && k.To >= 0 && k.To < len(total) && min(total[k.From], total[k.To]) > partExactBound {
			return exactLimit
		}
		return 0
	}
	w := a.newWorker(rank, rows)
	if rows != nil {
		rows.begin(0)
	}
	err = w.joinAndAggregate(&d)
	if rows != nil {
		if eerr := rows.end(); err == nil {
			err = eerr
		}
	}
	if err != nil {
		if dw != nil {
			dw.abandon(func(int) bool { return true })
		}
		return err
	}
	if dw != nil {
		if err := dw.finish(); err != nil {
			return err
		}
	}
	return writeGob(cfg.State, stateOf(w, a.keys, cfg.Rank, held, uint64(n)))
}

// checkAllParts says which partitions the export wrote records into that
// no state holds, with those records: an analysis of the rest would count
// them nowhere.
func (a *exportAnalysis) checkAllParts(heldBy map[int]string) error {
	missing := map[int]uint64{}
	var total uint64
	for _, cp := range a.parts {
		for p, n := range cp {
			if _, ok := heldBy[p]; !ok {
				missing[p] += n
				total += n
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	ps := slices.Sorted(maps.Keys(missing))
	var names []string
	for i, p := range ps {
		if i == 8 {
			names = append(names, fmt.Sprintf("and %d more", len(ps)-8))
			break
		}
		names = append(names, fmt.Sprintf("%d (%d records)", p, missing[p]))
	}
	return fmt.Errorf("no state holds partition %s: the export wrote %d records there (channels/*.json); join-part every partition with records and give all their states", strings.Join(names, ", "), total)
}

// checkPartCounts holds each channel's records read in each partition
// against what the export wrote there (ExportChannel.Parts): more is a
// records file given twice or a copy of one, fewer a file missing. It
// returns the partitions read, in order.
func (a *exportAnalysis) checkPartCounts(read map[int][]uint64, files []string) ([]int, error) {
	parts := slices.Sorted(maps.Keys(read))
	var bad []string
	for _, p := range parts {
		for ch, got := range read[p] {
			want := a.parts[ch][p]
			if got == want {
				continue
			}
			stem := strings.TrimSuffix(filepath.Base(a.meta[ch]), ".json")
			file := filepath.Join(partDir("", p), stem+".parquet")
			why := fmt.Sprintf("its file (the export wrote %s) is missing from the records given", file)
			if got > want {
				why = "a records file given twice, or a copy of one"
			}
			bad = append(bad, fmt.Sprintf("partition %d, channel %s (%s): %d records read, the export wrote %d there: %s",
				p, a.keys[ch], a.chans[ch].Label(), got, want, why))
		}
	}
	if len(bad) == 0 {
		return parts, nil
	}
	more := ""
	if len(bad) > 3 {
		more = fmt.Sprintf("; and %d more", len(bad)-3)
		bad = bad[:3]
	}
	return nil, fmt.Errorf("the records do not hold each of the export's records once: %s%s (records given: %s)",
		strings.Join(bad, "; "), more, strings.Join(files, ", "))
}

// stateOf is a worker's state, for MergeParts.
func stateOf(w *worker, keys []string, rank, parts []int, records uint64) *partState {
	st := &partState{Version: partStateVersion, Channels: keys, Rank: rank, Parts: parts, Records: records, Tuples: w.tuples,
		Durations: w.durations, SkippedTuples: w.skippedTuples, SkippedRecords: w.skippedRecords, T0: w.t0}
	for k, v := range w.votes {
		st.Votes = append(st.Votes, voteState{A: k[0], B: k[1], Sure: v.sure, Likely: v.likely})
	}
	if w.cap != nil {
		st.Capacity = w.cap.State()
	}
	for _, p := range w.pairs {
		ps := pairState{Kind: p.Key.Kind, From: p.Key.From, To: p.Key.To, Dur: p.Dur.state(), Err: p.Err.state(),
			Paper: p.Paper.state(), Baseline: p.Baseline.state(), Scenarios: p.Scenarios}
		if p.RetErr != nil {
			r, o := p.RetErr.state(), p.OursErr.state()
			ps.RetErr, ps.OursErr = &r, &o
		}
		st.Pairs = append(st.Pairs, ps)
	}
	return st
}

// readPartRecords reads the records of the Parquet file at path a row
// group at a time, a column at a time (the export's files: millions of
// rows; a row at a time through parquet-go's reflection took 0.3 us a
// record): tuple_id and tsc 64-bit integers, channel_key a string, none
// of them null; key maps a channel key to the channel's index.
func readPartRecords(path string, key func([]byte) (uint32, error), add func(ids, tscs []int64, chs []uint32) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return err
	}
	var cols [3]int
	for i, c := range []struct {
		name string
		kind parquet.Kind
	}{{"tuple_id", parquet.Int64}, {"tsc", parquet.Int64}, {"channel_key", parquet.ByteArray}} {
		col, ok := pf.Schema().Lookup(c.name)
		if !ok {
			return fmt.Errorf("no column %q (an export's records have tuple_id, tsc and channel_key)", c.name)
		}
		if !col.Node.Leaf() || col.Node.Type().Kind() != c.kind || col.Node.Repeated() {
			return fmt.Errorf("column %q is %s: a %v is read", c.name, col.Node.Type(), c.kind)
		}
		cols[i] = col.ColumnIndex
	}
	var ids, tscs []int64
	var chs []uint32
	for _, rg := range pf.RowGroups() {
		chunks := rg.ColumnChunks()
		ids, tscs, chs = ids[:0], tscs[:0], chs[:0]
		if n := rg.NumRows(); n > int64(cap(ids)) && n <= 1<<26 { // a row group's rows at once (a bad file's count not believed past 2^26)
			ids, tscs, chs = make([]int64, 0, n), make([]int64, 0, n), make([]uint32, 0, n)
		}
		err := eachPage(chunks[cols[0]], func(p parquet.Page) error {
			ids, err = appendInt64s(ids, p)
			return err
		})
		if err == nil {
			err = eachPage(chunks[cols[1]], func(p parquet.Page) error {
				tscs, err = appendInt64s(tscs, p)
				return err
			})
		}
		if err == nil {
			err = eachPage(chunks[cols[2]], func(p parquet.Page) error {
				chs, err = appendKeys(chs, p, key)
				return err
			})
		}
		if err != nil {
			return err
		}
		if len(ids) != len(tscs) || len(ids) != len(chs) {
			return fmt.Errorf("a row group with %d ids, %d TSCs and %d channels", len(ids), len(tscs), len(chs))
		}
		if err := add(ids, tscs, chs); err != nil {
			return err
		}
	}
	return nil
}

// eachPage calls fn with each page of a column chunk; a page with nulls
// is an error (no record lacks a column).
func eachPage(c parquet.ColumnChunk, fn func(parquet.Page) error) error {
	pages := c.Pages()
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if p.NumNulls() > 0 {
			parquet.Release(p)
			return fmt.Errorf("column %d has %d nulls in a page", c.Column(), p.NumNulls())
		}
		err = fn(p)
		parquet.Release(p)
		if err != nil {
			return err
		}
	}
}

// appendInt64s appends a page of an INT64 column, plain or dictionary
// encoded.
func appendInt64s(out []int64, p parquet.Page) ([]int64, error) {
	d := p.Data()
	if dict := p.Dictionary(); dict != nil {
		for _, i := range d.Int32() {
			out = append(out, dict.Index(i).Int64())
		}
		return out, nil
	}
	return append(out, d.Int64()...), nil
}

// appendKeys appends a page of channel keys as channel indices: a
// dictionary's entries are looked up once a page.
func appendKeys(out []uint32, p parquet.Page, key func([]byte) (uint32, error)) ([]uint32, error) {
	if dict := p.Dictionary(); dict != nil {
		m := make([]uint32, dict.Len())
		for i := range m {
			k, err := key(dict.Index(int32(i)).ByteArray())
			if err != nil {
				return out, err
			}
			m[i] = k
		}
		d := p.Data()
		for _, i := range d.Int32() {
			out = append(out, m[i])
		}
		return out, nil
	}
	vals := make([]parquet.Value, p.NumValues())
	n, err := p.Values().ReadValues(vals)
	if err != nil && err != io.EOF {
		return out, err
	}
	for _, v := range vals[:n] {
		k, err := key(v.ByteArray())
		if err != nil {
			return out, err
		}
		out = append(out, k)
	}
	return out, nil
}

// writeGob writes v's gob to path through a file beside it, renamed into
// place once whole: straight to the file (a state is tens of MB while its
// pairs keep exact values; a buffer of it all, grown by doubling, cost
// copies and page faults).
func writeGob(path string, v any) error {
	return createAtomic(path, func(f io.Writer) error {
		bw := bufio.NewWriterSize(f, 1<<20)
		if err := gob.NewEncoder(bw).Encode(v); err != nil {
			return err
		}
		return bw.Flush()
	})
}

// ErrOtherOrder: the votes of all the partitions give another channel order
// than the one they were joined with: join them again with
// MergeResult.Order.
var ErrOtherOrder = errors.New("the votes of all partitions give another channel order: join them again with it")

// MergeResult is what MergeParts found.
type MergeResult struct {
	*Result
	// Rank is the channel order the states' votes give, each channel's
	// place: what RunPart takes. Order is the tuple channels' labels in it,
	// first to last.
	Rank  []int
	Order []string
}

// MergeParts merges the states RunPart wrote for every partition of the
// export and, when they were joined with an order (not votes only) and
// cfg.Out is set, writes summary.csv, summary.parquet, summary.txt and
// model.json into it. With votes-only states it only gives the order.
// Where the states' votes give another order than they were joined with,
// it writes nothing and returns ErrOtherOrder with the order to join with.
//
// With stateOut, it writes the merged states as one state there instead
// (what merging them with the others later gives the same results: a
// merge done in a tree, on the executors) and only that.
//
// Every record counts once: two states that hold one partition are
// refused, and states joined with an order must hold every partition the
// export wrote records into (a merge into stateOut, and votes only, need
// not: the last merge, and a sample for the order).
func MergeParts(cfg Config, export string, states []string, stateOut string) (*MergeResult, error) {
	a, _, err := prepareExport(cfg, export)
	if err != nil {
		return nil, err
	}
	w := a.newWorker(nil, nil)
	var joined []int
	var withCap bool
	heldBy := map[int]string{} // export partition -> the state holding it
	for i, path := range states {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		var st partState
		err = gob.NewDecoder(f).Decode(&st)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: no partition state of this version (%w)", path, err)
		}
		if st.Version != partStateVersion || !slices.Equal(st.Channels, a.keys) {
			return nil, fmt.Errorf("%s: a state of another export (its channels %v; this export's %v)", path, st.Channels, a.keys)
		}
		for _, p := range st.Parts {
			if other, ok := heldBy[p]; ok {
				return nil, fmt.Errorf("%s and %s both hold partition %d: a state given twice, or two states of one partition (each partition's records count once)", other, path, p)
			}
			heldBy[p] = path
		}
		if i == 0 {
			joined, withCap = st.Rank, st.Capacity != nil
		} else if !slices.Equal(st.Rank, joined) {
			return nil, fmt.Errorf("%s: joined with order %v, %s with %v: every partition takes one order", path, st.Rank, states[0], joined)
		} else if withCap != (st.Capacity != nil) {
			return nil, fmt.Errorf("%s and %s: one joined with capacity's sums, the other without (join-part --no-capacity): every partition is joined alike", path, states[0])
		}
		o := a.newWorker(nil, nil)
		if st.Capacity != nil && !cfg.NoCapacity {
			if w.cap == nil {
				// The windows the partitions were joined with (join-part's
				// --window): every state's, checked by MergeState.
				a.cap.win = st.Capacity.Win
				a.cap.grid = cost.Grid{T0: a.cap.win.T0, Width: a.cap.win.Width, N: a.cap.win.N, Sub: costCells}
				w.cap = a.newCapacityAcc()
			}
			if o.cap = a.newCapacityAcc(); o.cap == nil {
				return nil, fmt.Errorf("%s: a state with capacity sums, for an export whose channels mark no operator", path)
			}
			if err := o.cap.MergeState(st.Capacity); err != nil {
				return nil, fmt.Errorf("%s: %w (every partition is joined with one --window)", path, err)
			}
		}
		o.tuples, o.durations, o.skippedTuples, o.skippedRecords, o.t0 = st.Tuples, st.Durations, st.SkippedTuples, st.SkippedRecords, st.T0
		a.res.Records += st.Records
		for _, v := range st.Votes {
			o.votes[[2]uint32{v.A, v.B}] = &votes{sure: v.Sure, likely: v.Likely}
		}
		for _, p := range st.Pairs {
			key := PairKey{p.Kind, p.From, p.To}
			ps := &PairStats{Key: key, Dur: p.Dur.stats(), Err: p.Err.stats(), Paper: p.Paper.stats(), Baseline: p.Baseline.stats(), Scenarios: p.Scenarios}
			if p.RetErr != nil {
				ps.RetErr, ps.OursErr = p.RetErr.stats(), p.OursErr.stats()
			}
			o.pairs[key] = ps
		}
		w.merge(o)
	}
	held := slices.Sorted(maps.Keys(heldBy))
	if stateOut != "" {
		// A merge in a tree: the partitions still missing are the last
		// merge's to name.
		return &MergeResult{Result: a.res}, writeGob(stateOut, stateOf(w, a.keys, joined, held, a.res.Records))
	}
	rank, err := a.rankChannels(w.votes)
	if err != nil {
		return nil, err
	}
	res := &MergeResult{Result: a.res, Rank: rank}
	byRank := make([]int, len(a.chans))
	for i, r := range rank {
		byRank[r] = i
	}
	for _, i := range byRank {
		if a.chans[i].Role == RoleTuples {
			res.Order = append(res.Order, a.chans[i].Label())
		}
	}
	if joined == nil {
		return res, nil // votes only: a sample of the partitions gives the order
	}
	if err := a.checkAllParts(heldBy); err != nil {
		return nil, err
	}
	if !slices.Equal(rank, joined) {
		return res, ErrOtherOrder
	}
	a.finishJoin(w, rank)
	a.res.CritPathNote = "critical path: not analysed on partitions (it needs every record in time order: analyze a time range on one machine; docs/spark.md)"
	a.res.MaceNote = "Mace: not analysed on partitions (it needs every record in time order: analyze a time range on one machine; docs/spark.md)"
	for _, p := range a.pairs {
		a.res.Pairs = append(a.res.Pairs, p)
	}
	sort.Slice(a.res.Pairs, func(i, j int) bool { return a.less(a.res.Pairs[i].Key, a.res.Pairs[j].Key) })
	if cfg.Out == "" {
		return res, nil
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, err
	}
	for _, name := range outputs {
		if err := os.Remove(filepath.Join(cfg.Out, name)); err != nil && !errors.Is(err, fs.ErrNotExist) && name != "durations.parquet" {
			return nil, err
		}
	}
	a.cfg.Out = cfg.Out
	// The counter and FIRSTLAST channels, from the export's copies of
	// their logs (logs/), as analyze reads them, in the same order.
	if err := a.runSpans(); err != nil {
		return nil, err
	}
	if err := a.writeThroughput(); err != nil {
		return nil, err
	}
	if err := a.writeCapacity(); err != nil {
		return nil, err
	}
	if math.IsInf(a.t0, 1) {
		a.t0 = 0
	}
	if err := a.writeSummaries(); err != nil {
		return nil, err
	}
	return res, nil
}
