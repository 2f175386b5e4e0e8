package scaleout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"cloudprofiler/internal/analyze"
	"cloudprofiler/internal/logfile"
	"cloudprofiler/internal/results"
	"cloudprofiler/minrtt"
)

// The export (cloudprofiler export): the pipeline's first stages, decode
// and partition (analyze.Decoded), ending in files instead of the
// join, so that the join can run elsewhere, a partition a task (on Apache
// Spark: docs/spark.md). Each tuple record is translated into the
// reference clock and written to the Parquet file of its partition,
//
//	OUT/records/part=PPPPP/STEM.parquet
//
// where the partition is the top log2(P) bits of Fibonacci hashing of the
// tuple id, as analyze's own partitions (a record's analyze partition then
// lies inside its export partition), and STEM names the nodes this export
// read (one export per node, or one for all). Beside them: export.json
// (what every exporter into OUT must agree on: the partitions, the hash,
// the reference, the method), channels/STEM.json (the channels read: their
// headers, records and problems), and rounds/ (a copy of the rounds, from
// which any task rebuilds the same model). A node needs only its own logs
// and the rounds.

// ExportFormat names the export's layout in export.json; ExportVersion is
// its version (a reader refuses another).
const (
	ExportFormat  = "cloudprofiler-export"
	ExportVersion = 3 // 2: counter and FIRSTLAST logs copied, tuple channels' TSC span; 3: records per partition
	// DefaultExportPartitions is export's default P.
	DefaultExportPartitions = 64
)

// ExportRow is one tuple record in an export's Parquet files.
type ExportRow struct {
	TupleID int64 `parquet:"tuple_id,delta"`
	// TSC is the record's counter reading on its node, its 64 bits as a
	// signed integer: Spark has no unsigned 64-bit type (it reads one as a
	// decimal); a reading past 2^63 (never seen: 97 years at 3 GHz) shows
	// negative, its bits kept (uint64(tsc) gives it back).
	TSC int64 `parquet:"tsc,delta"`
	// Channel is the channel's label, node/name; ChannelKey names the
	// channel uniquely in the export (a label may be two channels': a
	// FOX_START channel and its return log, or two processes' channels of
	// one name): node/FILE, the name of its log file (channels/*.json).
	Channel    string `parquet:"channel,dict"`
	ChannelKey string `parquet:"channel_key,dict"`
	// EstCycles is the record's reference-counter estimate relative to the
	// export's origin (export.json: add it for the reference counter's
	// reading), ErrCycles its strict bound: the reference counter read
	// within EstCycles ± ErrCycles of the origin when the record was
	// logged.
	EstCycles float64 `parquet:"est_cycles"`
	ErrCycles float64 `parquet:"err_cycles"`
}

// ExportMeta is export.json.
type ExportMeta struct {
	Format     string  `json:"format"`
	Version    int     `json:"version"`
	Partitions int     `json:"partitions"`
	Hash       string  `json:"hash"`
	Ref        string  `json:"ref"`
	RefHz      float64 `json:"ref_hz"`
	Origin     uint64  `json:"origin"` // the reference counter's reading at est_cycles 0
	Method     string  `json:"method"`
	Rounds     bool    `json:"rounds"` // rounds/ holds the rounds (else: one node, its own counter)
}

// exportHash is export.json's description of the partition of a record.
const exportHash = "fibonacci: (uint64(tuple_id) * 0x9E3779B97F4A7C15) >> (64 - log2(partitions))"

// ExportChannels is channels/STEM.json.
type ExportChannels struct {
	Stem     string          `json:"stem"`
	Nodes    []string        `json:"nodes"`
	Records  uint64          `json:"records"`
	Channels []ExportChannel `json:"channels"`
}

// ExportChannel is one channel an export read.
type ExportChannel struct {
	Key      string          `json:"key"` // the records' channel_key
	Label    string          `json:"label"`
	Node     string          `json:"node"`
	Name     string          `json:"name"`
	Role     string          `json:"role"`
	Records  uint64          `json:"records"` // tuple records exported (0 for the other roles)
	Problems []string        `json:"problems,omitempty"`
	Path     string          `json:"path"` // where the exporter read it
	Header   json.RawMessage `json:"header"`
	// Copy is the export's copy of a counter or FIRSTLAST channel's log
	// (logs/NODE/FILE, relative to the export): their records are few,
	// a period or a run apiece, and the analysis reads them whole for
	// throughput and runs.
	Copy string `json:"copy,omitempty"`
	// TSCMin and TSCMax are a tuple channel's smallest and largest TSC
	// (none without records): with them an analysis of the export places
	// the run's first and last tuple records, and the capacity windows, as
	// analyze does.
	TSCMin *uint64 `json:"tsc_min,omitempty"`
	TSCMax *uint64 `json:"tsc_max,omitempty"`
	// Parts is how many of its records the export wrote into each
	// partition (the partitions it has records in): join-part refuses a
	// partition whose files hold more or fewer of them (a file given
	// twice, a copy, a file missing), and merge-parts names a partition
	// that has records here and no state.
	Parts map[int]uint64 `json:"parts,omitempty"`
}

// ExportConfig is one export: Logs, Rounds, Ref, Method, MemBytes,
// Workers, SpillDir, Progress and OneRun as for analyze, into Out.
type ExportConfig struct {
	analyze.Config
	Partitions int // P, a power of two (default 64)
	// From and To are Cut's time range: wall-clock times (RFC 3339), or
	// seconds after the first round began; "": open.
	From, To string
}

// ExportResult is what Export wrote.
type ExportResult struct {
	Meta     ExportMeta
	Channels ExportChannels
	Files    int // Parquet files written (partitions with records)
	Bytes    int64
	Problems []*analyze.Channel // channels whose files were damaged or lost records
}

// Export decodes cfg.Logs, translates every tuple record into the
// reference clock and writes them, partitioned, into cfg.Out.
func Export(cfg ExportConfig) (*ExportResult, error) {
	if cfg.Partitions == 0 {
		cfg.Partitions = DefaultExportPartitions
	}
	if p := cfg.Partitions; p < 1 || p > analyze.MaxPartitions || p&(p-1) != 0 {
		return nil, fmt.Errorf("export: --partitions %d: a power of two from 1 to %d", p, analyze.MaxPartitions)
	}
	pr, unlock, err := prepareOut(cfg.Config)
	if err != nil {
		return nil, err
	}
	defer unlock()
	chans, model := pr.Channels(), pr.Model()
	meta := ExportMeta{Format: ExportFormat, Version: ExportVersion, Partitions: cfg.Partitions, Hash: exportHash,
		Ref: model.Ref(), RefHz: model.RefHz(), Origin: model.RefOrigin(), Method: model.Method().String(), Rounds: cfg.Rounds != ""}
	nodes := map[string]bool{}
	for _, ch := range chans {
		nodes[ch.Node] = true
	}
	var names []string
	for n := range nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	stem := exportStem(names)
	if err := checkExportDir(cfg.Out, meta, stem, names); err != nil {
		return nil, err
	}
	spillDir := cfg.SpillDir
	if spillDir == "" {
		spillDir = filepath.Join(cfg.Out, ".spill")
	}
	dec, err := pr.Decode(cfg.Partitions, spillDir, cfg.SpillDir == "")
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	// Only now is anything in Out touched: this stem's files from an
	// earlier export go (a node exported again), then the new ones come.
	if err := removeExportStem(cfg.Out, stem, names); err != nil {
		return nil, err
	}
	res := &ExportResult{Meta: meta}
	nfiles, nbytes, parts, err := writeExportParts(pr, dec, cfg.Out, stem, cfg.Partitions)
	if err != nil {
		removeExportStem(cfg.Out, stem, names)
		return nil, err
	}
	res.Files, res.Bytes = nfiles, nbytes
	res.Channels = ExportChannels{Stem: stem, Nodes: names, Records: dec.Records()}
	// Every channel read, so that an analysis of the export numbers and
	// names them as analyze does; the tuple and return channels' records
	// are in records/, the counter and FIRSTLAST channels' logs copied
	// whole into logs/ (lineage: not exported).
	keys := exportKeys(chans)
	for i, ch := range chans {
		hdr, err := json.Marshal(ch.Header)
		if err != nil {
			return nil, err
		}
		var cp string
		if ch.Role == analyze.RoleCounter || ch.Role == analyze.RoleFirst {
			cp = "logs/" + exportStem([]string{ch.Node}) + "/" + filepath.Base(keys[i])
			if err := copyFileAtomic(ch.Path, filepath.Join(cfg.Out, filepath.FromSlash(cp))); err != nil {
				removeExportStem(cfg.Out, stem, names)
				return nil, err
			}
		}
		ec := ExportChannel{Key: keys[i], Label: ch.Label(), Node: ch.Node, Name: ch.Name,
			Role: exportRole(ch.Role), Records: dec.ChannelRecords(i), Problems: ch.Problems, Path: ch.Path, Copy: cp, Header: hdr}
		if lo, hi, ok := dec.TSCSpan(i); ch.Role == analyze.RoleTuples && ok {
			ec.TSCMin, ec.TSCMax = &lo, &hi
		}
		var inParts uint64
		for p, n := range parts[i] {
			if n > 0 {
				if ec.Parts == nil {
					ec.Parts = map[int]uint64{}
				}
				ec.Parts[p] = n
				inParts += n
			}
		}
		if inParts != ec.Records {
			removeExportStem(cfg.Out, stem, names)
			return nil, fmt.Errorf("export: channel %s: %d records decoded, %d written into partitions", ec.Label, ec.Records, inParts)
		}
		res.Channels.Channels = append(res.Channels.Channels, ec)
		if len(ch.Problems) > 0 {
			res.Problems = append(res.Problems, ch)
		}
	}
	if err := writeExportMeta(cfg.Out, cfg.Rounds, meta, res.Channels); err != nil {
		removeExportStem(cfg.Out, stem, names)
		return nil, err
	}
	return res, nil
}

// exportRole is how channels/STEM.json names a channel's role.
func exportRole(r analyze.Role) string {
	switch r {
	case analyze.RoleReturn:
		return "return"
	case analyze.RoleFirst:
		return "firstlast"
	case analyze.RoleCounter:
		return "counter"
	case analyze.RoleLineage:
		return "lineage"
	}
	return "tuples"
}

// exportKeys are the channels' keys: node/FILE (the log file's name),
// with #2, #3... where one node has two files of one name (read from
// several directories).
func exportKeys(chans []*analyze.Channel) []string {
	keys := make([]string, len(chans))
	seen := map[string]int{}
	for i, c := range chans {
		k := c.Node + "/" + filepath.Base(c.Path)
		seen[k]++
		if n := seen[k]; n > 1 {
			k += fmt.Sprintf("#%d", n)
		}
		keys[i] = k
	}
	return keys
}

// exportStem names an export's files by the nodes it read.
func exportStem(nodes []string) string {
	var b strings.Builder
	for i, n := range nodes {
		if i > 0 {
			b.WriteByte('+')
		}
		for _, r := range n {
			if r == '/' || r == '=' || r == '+' || r < ' ' || r == '%' {
				fmt.Fprintf(&b, "%%%02X", r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}

// checkExportDir refuses an Out that another export made with other
// partitions, another reference or method, or whose other exports hold
// one of these nodes (its records would be there twice).
func checkExportDir(out string, meta ExportMeta, stem string, nodes []string) error {
	old, err := readExportMeta(out)
	if errors.Is(err, fs.ErrNotExist) {
		return refuseForeignDir(out, "export.json", "an export writes records/, channels/, rounds/ and export.json")
	}
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if old.Version != meta.Version || old.Partitions != meta.Partitions || old.Ref != meta.Ref || old.Method != meta.Method ||
		old.Origin != meta.Origin || old.Rounds != meta.Rounds {
		return fmt.Errorf("export: %s holds an export with %d partitions, reference %s (origin %d), method %s; this one would have %d, %s (origin %d), %s: one export's nodes must agree (the same rounds, --ref, --method and --partitions), or give another directory",
			out, old.Partitions, old.Ref, old.Origin, old.Method, meta.Partitions, meta.Ref, meta.Origin, meta.Method)
	}
	metas, _ := filepath.Glob(filepath.Join(out, "channels", "*.json"))
	for _, m := range metas {
		var ec ExportChannels
		b, err := os.ReadFile(m)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if err := json.Unmarshal(b, &ec); err != nil {
			return fmt.Errorf("export: %s: %w", m, err)
		}
		if ec.Stem == stem {
			continue // this node set again: replaced
		}
		for _, n := range ec.Nodes {
			for _, m2 := range nodes {
				if n == m2 {
					return fmt.Errorf("export: node %s is already in %s (exported with %s): its records would be there twice; remove %s and records/part=*/%s.parquet first, or export into another directory",
						n, out, strings.Join(ec.Nodes, ", "), m, ec.Stem)
				}
			}
		}
	}
	return nil
}

// refuseForeignDir refuses an out without its marker file that is not
// empty: someone else's directory, nothing of which is touched.
func refuseForeignDir(out, marker, writes string) error {
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return fmt.Errorf("export: %s is not empty and holds no %s: give a new directory (%s)", out, marker, writes)
	}
	return nil
}

// removeExportStem removes stem's files from out (an earlier export of the
// same nodes): its records, its channels and its nodes' copied logs.
func removeExportStem(out, stem string, nodes []string) error {
	old, _ := filepath.Glob(filepath.Join(out, "records", "part=*", stem+".parquet*"))
	old = append(old, filepath.Join(out, "channels", stem+".json"))
	for _, f := range old {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("export: %w", err)
		}
	}
	for _, n := range nodes {
		if err := os.RemoveAll(filepath.Join(out, "logs", exportStem([]string{n}))); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	return nil
}

// writeExportParts writes each export partition's records, translated:
// export partition p holds analyze partitions p<<j .. (p+1)<<j - 1 (their
// top bits), read one at a time, so memory stays in the budget. Workers
// take export partitions in turn.
//
// It returns the files written, their bytes, and each channel's records in
// each partition ([channel][partition]).
func writeExportParts(pr *analyze.Prepared, dec *analyze.Decoded, out, stem string, parts int) (int, int64, [][]uint64, error) {
	chans, model := pr.Channels(), pr.Model()
	shift := bits.TrailingZeros(uint(dec.Partitions())) - bits.TrailingZeros(uint(parts))
	counts := make([][]uint64, len(chans))
	for i := range counts {
		counts[i] = make([]uint64, parts) // each worker writes its own partitions' elements
	}
	labels, keys := make([]string, len(chans)), exportKeys(chans)
	nodes, waits := make([]int, len(chans)), make([]bool, len(chans))
	for i, c := range chans {
		labels[i], nodes[i], waits[i] = c.Label(), pr.Node(i), dec.NotesWaits(i)
	}
	var next atomic.Int64
	var files, size atomic.Int64
	errs := make([]error, pr.Workers())
	var wg sync.WaitGroup
	for wk := range errs {
		wg.Add(1)
		go func(wk int) {
			defer wg.Done()
			var d analyze.Records
			var tr minrtt.Translated
			rows := make([]ExportRow, 0, 4096)
			for errs[wk] == nil {
				p := int(next.Add(1)) - 1
				if p >= parts {
					return
				}
				n := uint64(0)
				for k := p << shift; k < (p+1)<<shift; k++ {
					n += dec.PartitionRecords(k)
				}
				if n == 0 {
					continue
				}
				dir := partDir(out, p)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					errs[wk] = fmt.Errorf("export: %w", err)
					return
				}
				path := filepath.Join(dir, stem+".parquet")
				// No bounds of the channels' names: nothing filters by
				// them. zstd's fastest level: join-part reads the file
				// once, as fast (20M records: the export took 2.6-3.2 s,
				// 224 MB, against 2.5-3.7 s, 201 MB, at the default).
				w, err := results.Create[ExportRow](path, results.NoBounds("channel", "channel_key"), results.FastestCompression())
				if err != nil {
					errs[wk] = fmt.Errorf("export: %w", err)
					return
				}
				err = func() error {
					for k := p << shift; k < (p+1)<<shift; k++ {
						if err := dec.Read(k, &d); err != nil {
							return err
						}
						for i := range d.ID {
							// The note of a wait stays behind: the parts
							// have no cost model for it to serve (docs/spark.md).
							ch, tsc := d.Ch[i], d.TSC[i]
							counts[ch][p]++
							if waits[ch] {
								tsc &^= logfile.WaitedBit
							}
							model.TranslateInto(&tr, nodes[ch], tsc)
							v := tr.Value(model)
							rows = append(rows, ExportRow{TupleID: d.ID[i], TSC: int64(tsc), Channel: labels[ch], ChannelKey: keys[ch], EstCycles: v.Est, ErrCycles: v.Err})
							if len(rows) == cap(rows) {
								if err := w.Write(rows); err != nil {
									return err
								}
								rows = rows[:0]
							}
						}
					}
					if err := w.Write(rows); err != nil {
						return err
					}
					rows = rows[:0]
					return w.Close()
				}()
				if err != nil {
					w.Abort()
					errs[wk] = fmt.Errorf("export: %s: %w", path, err)
					return
				}
				files.Add(1)
				if st, err := os.Stat(path); err == nil {
					size.Add(st.Size())
				}
			}
		}(wk)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, 0, nil, err
		}
	}
	return int(files.Load()), size.Load(), counts, nil
}

// partDir is export partition p's directory in the export at out.
func partDir(out string, p int) string {
	return filepath.Join(out, "records", fmt.Sprintf("part=%05d", p))
}

// writeExportMeta writes export.json, channels/STEM.json and rounds/ (a
// copy; refused when out holds other rounds).
func writeExportMeta(out, rounds string, meta ExportMeta, ch ExportChannels) error {
	if err := copyRounds(out, rounds); err != nil {
		return err
	}
	b, err := json.MarshalIndent(ch, "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(out, "channels"), 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(out, "channels", ch.Stem+".json"), append(b, '\n')); err != nil {
		return err
	}
	if b, err = json.MarshalIndent(meta, "", " "); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(out, "export.json"), append(b, '\n'))
}

// copyRounds copies the rounds into out/rounds/ (refused when it holds
// other rounds: every node of one export or cut takes the same).
func copyRounds(out, rounds string) error {
	if rounds != "" {
		src, err := filepath.Glob(filepath.Join(rounds, "round-*.json"))
		if err != nil {
			return err
		}
		dst := filepath.Join(out, "rounds")
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		have, _ := filepath.Glob(filepath.Join(dst, "round-*.json"))
		same := len(have) == len(src)
		for _, f := range src {
			b, err := os.ReadFile(f)
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			t := filepath.Join(dst, filepath.Base(f))
			if old, err := os.ReadFile(t); err == nil {
				if !bytes.Equal(old, b) {
					same = false
				}
				continue
			}
			if len(have) > 0 {
				same = false
				continue
			}
			if err := writeFileAtomic(t, b); err != nil {
				return err
			}
		}
		if len(have) > 0 && !same {
			return fmt.Errorf("export: %s holds other rounds than %s: every node of one export takes the same rounds (copy them from the tsc-server's --out)", dst, rounds)
		}
	}
	return nil
}
