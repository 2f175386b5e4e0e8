package scaleout

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"cloudprofiler/internal/analyze"
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
var partExactBound uint64 = analyze.ExactLimit

// partStateVersion is the state's format; MergeParts refuses another.
const partStateVersion = 5 // 2: capacity's sums; 3: the partitions it holds; 4: exact values as raw bytes, Min and Max as bits; 5: the analysis's State apart

// partState is what RunPart leaves for MergeParts (gob): the analysis's
// State of the partitions it holds, and what the export's checks need.
type partState struct {
	Version  int
	Channels []string // channel keys in index order: both sides must number alike
	Rank     []int    // the order joined with (nil: votes only)
	// Parts are the export partitions whose records it holds, each whole
	// (join-part checked them against the export's counts), in order:
	// MergeParts takes each partition once and wants every one.
	Parts []int
	State *analyze.State
}

// exportAnalysis is the analysis of an export's partitions, with each
// channel's key (ExportRow.ChannelKey).
type exportAnalysis struct {
	*analyze.Parts
	keys  []string
	parts []map[int]uint64 // each channel's records in each partition (ExportChannel.Parts)
	// meta[i] is the channels/*.json file that lists channel i.
	meta []string
}

// prepareExport is the analysis of the export in dir's partitions
// (analyze.ForPartitions): the channels from channels/*.json (in the
// order of their files, then as listed), the model from rounds/, after
// the checks that the export's files agree.
func prepareExport(cfg analyze.Config, dir string) (*exportAnalysis, *ExportMeta, error) {
	meta, err := readExportMeta(dir)
	if err != nil {
		return nil, nil, err
	}
	metas, _ := filepath.Glob(filepath.Join(dir, "channels", "*.json"))
	sort.Strings(metas)
	if len(metas) == 0 {
		return nil, nil, fmt.Errorf("export %s: no channels/*.json (an export writes one per node set it read)", dir)
	}
	var listed []analyze.ListedChannel
	var keys, labels, listedIn []string
	var parts []map[int]uint64
	seen := map[string]string{} // channel key -> the channels/*.json listing it
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
			if other, ok := seen[c.Key]; ok {
				return nil, nil, fmt.Errorf("export %s: channel %s is in %s and in %s: its node was exported into this directory twice (two exports at once, or node sets that overlap); export into a new directory", dir, c.Key, filepath.Base(other), filepath.Base(m))
			}
			seen[c.Key] = m
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
			listed = append(listed, analyze.ListedChannel{Path: path, Header: h, Records: c.Records, Problems: c.Problems,
				TSCMin: c.TSCMin, TSCMax: c.TSCMax})
			labels = append(labels, c.Label)
			keys = append(keys, c.Key)
			parts = append(parts, c.Parts)
			listedIn = append(listedIn, m)
		}
	}
	chans := analyze.ListedChannels(listed)
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
	pa, err := analyze.ForPartitions(cfg, chans, listed)
	if err != nil {
		return nil, nil, fmt.Errorf("export %s: %w", dir, err)
	}
	if o := pa.Model().RefOrigin(); o != meta.Origin {
		return nil, nil, fmt.Errorf("export %s: its rounds give origin %d, export.json says %d: rounds/ changed after the export", dir, o, meta.Origin)
	}
	return &exportAnalysis{pa, keys, parts, listedIn}, meta, nil
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
	a, meta, err := prepareExport(analyze.Config{MemBytes: cfg.MemBytes, Window: cfg.Window, NoCapacity: cfg.NoCapacity}, cfg.Export)
	if err != nil {
		return err
	}
	byKey := map[string]uint32{}
	for i, k := range a.keys {
		byKey[k] = uint32(i)
	}
	// The partition's records as columns, a channel's together in the
	// order they come (an export writes a channel's records in the order it
	// logged them), channels in index order: as analyze reads its own
	// partitions. Each channel has room for as many as the export says it
	// wrote into the partition (cfg.Partition; all partitions when it is not
	// given), allocated at once and written in place: grown a record at a
	// time, the copies and the garbage collector's work on them took half
	// of a partition's time. A record past its channel's room is counted,
	// not kept: the counts' check then refuses the records.
	nch := len(a.Channels())
	start := make([]int, nch+1)
	for ch := range nch {
		var want uint64
		for p, n := range a.parts[ch] {
			if cfg.Partition < 0 || p == cfg.Partition {
				want += n
			}
		}
		start[ch+1] = start[ch] + int(want)
	}
	var d analyze.Records
	d.ID, d.TSC, d.Ch = make([]int64, start[nch]), make([]uint64, start[nch]), make([]uint32, start[nch])
	next := slices.Clone(start[:nch])
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
				p := analyze.HashPartition(id, shift)
				if cfg.Partition >= 0 && p != cfg.Partition {
					return fmt.Errorf("tuple id %d belongs to partition %d, not %d: the records are not this partition's",
						id, p, cfg.Partition)
				}
				if p != lastPart {
					if cur = read[p]; cur == nil {
						cur = make([]uint64, nch)
						read[p] = cur
					}
					lastPart = p
				}
				ch := chs[i]
				cur[ch]++
				if j := next[ch]; j < start[ch+1] {
					d.ID[j], d.TSC[j], d.Ch[j] = id, uint64(tscs[i]), ch
					next[ch] = j + 1
				}
			}
			n += len(ids)
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	if cfg.Partition >= 0 && read[cfg.Partition] == nil {
		read[cfg.Partition] = make([]uint64, nch)
	}
	held, err := a.checkPartCounts(read, cfg.Records)
	if err != nil {
		return err
	}
	// Records of only some of the export's partitions (no cfg.Partition)
	// leave room behind a channel's: its records move up to the last one's.
	end := 0
	for ch := range nch {
		m := next[ch] - start[ch]
		if end != start[ch] {
			copy(d.ID[end:end+m], d.ID[start[ch]:next[ch]])
			copy(d.TSC[end:end+m], d.TSC[start[ch]:next[ch]])
			copy(d.Ch[end:end+m], d.Ch[start[ch]:next[ch]])
		}
		end += m
	}
	if end != n {
		return fmt.Errorf("%d records read, %d kept: the export's counts and its files disagree", n, end)
	}
	d.ID, d.TSC, d.Ch = d.ID[:end], d.TSC[:end], d.Ch[:end]
	rank := cfg.Rank
	if rank != nil {
		seen := make([]bool, nch)
		for _, r := range rank {
			if r < 0 || r >= len(seen) || seen[r] {
				rank = nil
				break
			}
			seen[r] = true
		}
		if len(rank) != nch {
			return fmt.Errorf("the channel order %v is no order of the export's %d channels (merge-parts gives one)", cfg.Rank, nch)
		}
	}
	// A pair whose channels hold more than partExactBound records each in
	// the whole export (each of its durations takes a record of both) keeps
	// no exact values here: in the end it almost surely has more durations
	// than analyze.ExactLimit, and its quantiles come from the merged
	// histograms, as analyze's do. Exact values kept in every partition only
	// to be dropped at the merge made most of a state's bytes (765 MB over
	// 64 partitions of 100M records), which Spark moves through its
	// shuffle. Where the pair has fewer in the end (most of its tuples
	// lost), its quantiles are still the histograms' (summary.csv's
	// quantiles column says so), where analyze's would be exact:
	// docs/spark.md.
	total := make([]uint64, nch)
	for ch, ps := range a.parts {
		for _, n := range ps {
			total[ch] += n
		}
	}
	noExact := func(k analyze.PairKey) bool {
		return k.From >= 0 && k.From < nch && k.To >= 0 && k.To < nch && min(total[k.From], total[k.To]) > partExactBound
	}
	st, err := a.Join(&d, rank, cfg.Durations, noExact)
	if err != nil {
		return err
	}
	return writeGob(cfg.State, &partState{Version: partStateVersion, Channels: a.keys, Rank: cfg.Rank, Parts: held, State: st})
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
				p, a.keys[ch], a.Channels()[ch].Label(), got, want, why))
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
