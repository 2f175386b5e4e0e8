package analyze

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"cloudprofiler/internal/cost"
	"cloudprofiler/internal/logfile"
	"cloudprofiler/minrtt"
)

// The pipeline's stages one at a time, for the scale-out path
// (internal/scaleout: export, cut, join-part, merge-parts), which runs
// them apart: the channels and the model (Prepared), decode and partition
// on each node (Decoded), the join of one partition elsewhere (Parts.Join,
// a State), and the merge of the states into analyze's outputs (Merger).
// What the analysis keeps of a join and how it merges stays here, in the
// same code as analyze's own workers; the files in between are the
// scale-out path's.

// Prepared is the logs' channels and the clock model, read as analyze
// reads them, before any record is decoded.
type Prepared struct{ a *analysis }

// Prepare reads cfg's channels and rounds, for decoding alone: capacity,
// the critical path, Mace, the report and durations off.
func Prepare(cfg Config) (*Prepared, error) {
	cfg.NoCapacity, cfg.NoCriticalPath, cfg.NoMace, cfg.NoReport, cfg.NoDurations = true, true, true, true, true
	a, err := prepare(cfg)
	if err != nil {
		return nil, err
	}
	return &Prepared{a}, nil
}

// Channels are the channels read, in analyze's order.
func (p *Prepared) Channels() []*Channel { return p.a.chans }

// Model is the clock model from the rounds.
func (p *Prepared) Model() *minrtt.Model { return p.a.model }

// Node is channel ch's node's index in the model.
func (p *Prepared) Node(ch int) int { return p.a.chNode[ch] }

// Workers is how many goroutines decode (Config.Workers, or GOMAXPROCS).
func (p *Prepared) Workers() int { return p.a.cfg.Workers }

// Decoded is every tuple record decoded into partitions by tuple id
// (partition.go), in memory or spilled.
type Decoded struct {
	a  *analysis
	ps *partitions
}

// Decode decodes every tuple record into at least minParts partitions (a
// power of two; more when the memory budget needs them), spilled into
// spillDir past the budget (removed at Close when removeDir), and checks
// the records as analyze does (contradict.go). Its errors name the export,
// its one caller.
func (p *Prepared) Decode(minParts int, spillDir string, removeDir bool) (*Decoded, error) {
	a := p.a
	total, files := a.tupleFiles()
	ps, err := partitionPlanAtLeast(total, files, a.cfg.Workers, a.cfg.MemBytes, spillDir, minParts)
	if err != nil {
		return nil, errors.New(strings.Replace(err.Error(), "analyze:", "export:", 1))
	}
	ps.removeDir = removeDir
	a.progress.total, a.progress.nparts = total, minParts
	if err := a.decodeAll(ps, a.cfg.Workers); err == nil {
		err = a.checkRecords()
	}
	if err != nil {
		ps.close()
		return nil, err
	}
	return &Decoded{a, ps}, nil
}

// Close removes the spill.
func (d *Decoded) Close() { d.ps.close() }

// Partitions is how many partitions the records are in: a power of two,
// partition k holding the ids whose Fibonacci hash's top bits are k.
func (d *Decoded) Partitions() int { return d.ps.n }

// PartitionRecords is how many records partition k holds.
func (d *Decoded) PartitionRecords(k int) uint64 { return d.ps.events[k] }

// Records are tuple records as columns: a record's tuple id, counter
// reading and channel at one index. On a channel that notes its thread's
// waits (NotesWaits), logfile.WaitedBit is set in the reading of a record
// that followed one.
type Records struct {
	ID  []int64
	TSC []uint64
	Ch  []uint32
	enc []byte // a spilled block as it was read
}

// Read loads partition k's records into r (reusing its arrays), a
// channel's records together in the order the channel logged them.
func (d *Decoded) Read(k int, r *Records) error {
	pd := partData{id: r.ID, tsc: r.TSC, ch: r.Ch, enc: r.enc}
	err := d.ps.read(k, &pd)
	r.ID, r.TSC, r.Ch, r.enc = pd.id, pd.tsc, pd.ch, pd.enc
	return err
}

// Records is how many tuple records were decoded.
func (d *Decoded) Records() uint64 { return d.a.res.Records }

// ChannelRecords is how many records channel ch held.
func (d *Decoded) ChannelRecords(ch int) uint64 { return d.a.chanRecords[ch] }

// TSCSpan is channel ch's smallest and largest counter reading (ok false
// without records).
func (d *Decoded) TSCSpan(ch int) (lo, hi uint64, ok bool) {
	return d.a.tscMin[ch], d.a.tscMax[ch], d.a.tscMin[ch] <= d.a.tscMax[ch]
}

// NotesWaits says whether channel ch's records note its thread's waits.
func (d *Decoded) NotesWaits(ch int) bool { return d.a.notesWaits[ch] }

// AsOnPartitions is c as an export's partitions are analysed: without the
// critical path, and capacity without its cost model (the visits are not
// walked): what the scale-out path's tests hold merge-parts' results
// against.
func (c Config) AsOnPartitions() Config {
	c.NoCriticalPath, c.testNoCostWalk = true, true
	return c
}

// ListedChannel is a channel as an export lists it.
type ListedChannel struct {
	Path     string // its log: where the exporter read it, or the export's copy
	Header   logfile.Header
	Records  uint64
	Problems []string
	// TSCMin and TSCMax are a tuple channel's smallest and largest counter
	// reading (nil: no records).
	TSCMin, TSCMax *uint64
}

// Parts is the analysis of an export's partitions: the channels an export
// lists, the model from its rounds.
type Parts struct{ a *analysis }

// NoWalkOnPartitions is why capacity has no cost model on an export's
// partitions.
const NoWalkOnPartitions = "on partitions: the cost model walks each instance's visits in time order; analyze a time range for it, export --format logs"

// ListedChannels are the channels of an export's lists, labelled as
// analyze labels them (two processes' channels of one name).
func ListedChannels(listed []ListedChannel) []*Channel {
	chans := make([]*Channel, len(listed))
	for i, l := range listed {
		chans[i] = channelOf(l.Path, l.Header, l.Records)
		chans[i].Problems = l.Problems
	}
	labelProcesses(chans)
	return chans
}

// ForPartitions is the analysis of chans (ListedChannels of listed) with
// cfg's Ref, Method and Rounds, MemBytes, Window and NoCapacity: capacity
// without its cost model (the walk of each instance's visits in time
// order is not to be had on partitions), no critical path or Mace, one
// worker.
func ForPartitions(cfg Config, chans []*Channel, listed []ListedChannel) (*Parts, error) {
	model, _, err := buildModel(cfg, chans)
	if err != nil {
		return nil, err
	}
	for _, c := range chans {
		c.node = model.NodeIndex(c.Node)
		if c.node < 0 {
			return nil, fmt.Errorf("channel %s is on node %s, which the export's rounds do not measure", c.Label(), c.Node)
		}
	}
	cfg.NoCriticalPath, cfg.NoMace, cfg.NoReport = true, true, true
	if cfg.MemBytes <= 0 {
		cfg.MemBytes = 256 << 20
	}
	cfg.Workers = 1
	if err := checkCapacityConfig(&cfg); err != nil {
		return nil, err
	}
	a, err := newAnalysis(cfg, model, chans, &Result{})
	if err != nil {
		return nil, err
	}
	for i, l := range listed {
		if l.TSCMin != nil && l.TSCMax != nil {
			a.tscMin[i], a.tscMax[i] = *l.TSCMin, *l.TSCMax
		}
		// As decode sets it: capacity reads such a channel's instance as
		// analyze does (no order-of-marks reading; its busy share the cost
		// model's, which partitions have not: none).
		a.notesWaits[i] = chans[i].Header.Waits != ""
	}
	if err := a.capacityWindows(); err != nil {
		return nil, err
	}
	a.noCostModel = NoWalkOnPartitions
	return &Parts{a}, nil
}

// Channels are the channels, in the lists' order.
func (p *Parts) Channels() []*Channel { return p.a.chans }

// Model is the clock model from the export's rounds.
func (p *Parts) Model() *minrtt.Model { return p.a.model }

// Join joins r's records (a channel's together, in the order it logged
// them, channels in index order: as a partition is read) exactly as
// analyze joins one of its partitions, with the channel order rank (each
// channel's place; nil: votes only), writing their durations into the
// Parquet file durations ("": none). A pair for which noExact says so
// keeps no exact values, its quantiles the histograms' (nil: every pair
// keeps them up to ExactLimit).
func (p *Parts) Join(r *Records, rank []int, durations string, noExact func(PairKey) bool) (*State, error) {
	a := p.a
	var rows *rowBatcher
	var dw *durationWriter
	if rank != nil && durations != "" {
		s, err := newParquetSink(durations, 1)
		if err != nil {
			return nil, err
		}
		dw = newDurationWriter(1, []rowSink{s})
		rows = dw.batcher(a)
	}
	if rank != nil {
		a.resetSeriesBudget()
	}
	a.keptFrom = nil
	if noExact != nil {
		a.keptFrom = func(k PairKey) uint64 {
			if noExact(k) {
				return ExactLimit
			}
			return 0
		}
	}
	w := a.newWorker(rank, rows)
	if rows != nil {
		rows.begin(0)
	}
	err := w.joinAndAggregate(&partData{id: r.ID, tsc: r.TSC, ch: r.Ch})
	if rows != nil {
		if eerr := rows.end(); err == nil {
			err = eerr
		}
	}
	if err != nil {
		if dw != nil {
			dw.abandon(func(int) bool { return true })
		}
		return nil, err
	}
	if dw != nil {
		if err := dw.finish(); err != nil {
			return nil, err
		}
	}
	return w.state(uint64(len(r.ID))), nil
}

// Merger merges States as analyze merges its workers.
type Merger struct {
	a *analysis
	w *worker
}

// Merger is a merger of states of p's partitions.
func (p *Parts) Merger() *Merger { return &Merger{p.a, p.a.newWorker(nil, nil)} }

// Add merges st in. Capacity's sums are merged unless the analysis runs
// without capacity; every state's must have its windows.
func (m *Merger) Add(st *State) error {
	a := m.a
	o := a.newWorker(nil, nil)
	if st.Capacity != nil && !a.cfg.NoCapacity {
		if m.w.cap == nil {
			// The windows the partitions were joined with (join-part's
			// --window): every state's, checked by MergeState.
			a.cap.win = st.Capacity.Win
			a.cap.grid = cost.Grid{T0: a.cap.win.T0, Width: a.cap.win.Width, N: a.cap.win.N, Sub: costCells}
			m.w.cap = a.newCapacityAcc()
		}
		if o.cap = a.newCapacityAcc(); o.cap == nil {
			return errors.New("a state with capacity sums, for an export whose channels mark no operator")
		}
		if err := o.cap.MergeState(st.Capacity); err != nil {
			return fmt.Errorf("%w (every partition is joined with one --window)", err)
		}
	}
	o.setState(st)
	a.res.Records += st.Records
	m.w.merge(o)
	return nil
}

// State is the merged states as one (what merging it with the others
// later gives the same results: a merge in a tree).
func (m *Merger) State() *State { return m.w.state(m.a.res.Records) }

// Result is the merged states' Result (Records only, before Finish).
func (m *Merger) Result() *Result { return m.a.res }

// Rank is the channel order the merged votes give: each channel's place.
func (m *Merger) Rank() ([]int, error) { return m.a.rankChannels(m.w.votes) }

// Finish completes the merged join with the order rank as analyze
// completes its own and, out not "", writes summary.csv, summary.parquet,
// summary.txt, model.json, the throughput and capacity into out (the
// counter and FIRSTLAST channels read from their logs), removing what an
// earlier analysis left there. The critical path and Mace are not
// analysed: Result's notes say why.
func (m *Merger) Finish(rank []int, out string) error {
	a := m.a
	a.finishJoin(m.w, rank)
	a.res.CritPathNote = "critical path: not analysed on partitions (it needs every record in time order: analyze a time range on one machine; docs/spark.md)"
	a.res.MaceNote = "Mace: not analysed on partitions (it needs every record in time order: analyze a time range on one machine; docs/spark.md)"
	for _, p := range a.pairs {
		a.res.Pairs = append(a.res.Pairs, p)
	}
	sort.Slice(a.res.Pairs, func(i, j int) bool { return a.less(a.res.Pairs[i].Key, a.res.Pairs[j].Key) })
	if out == "" {
		return nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, name := range outputs {
		if err := os.Remove(filepath.Join(out, name)); err != nil && !errors.Is(err, fs.ErrNotExist) && name != "durations.parquet" {
			return err
		}
	}
	a.cfg.Out = out
	// The counter and FIRSTLAST channels, from the export's copies of
	// their logs, as analyze reads them, in the same order.
	if err := a.runSpans(); err != nil {
		return err
	}
	if err := a.writeThroughput(); err != nil {
		return err
	}
	if err := a.writeCapacity(); err != nil {
		return err
	}
	if math.IsInf(a.t0, 1) {
		a.t0 = 0
	}
	return a.writeSummaries()
}
