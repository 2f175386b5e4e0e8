package analyze

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/cost"
	"cloudprofiler/internal/critpath"
)

// The critical-path analysis (package critpath) rides on the pipeline like
// the capacity analysis: it reads the same operator marks (the capacity
// plan, made here when the capacity analysis is skipped), each worker
// feeds every tuple it joins to a collector of its own (aggregate.go), and
// after the join one pass over the visits, in time order, finds each
// slice's critical path and splits each hand-off into queueing and
// transfer. A join that runs again (pipeline.go) starts a new analysis.

// DefaultSlice is the critical path's slice.
const DefaultSlice = time.Second

// cpState is the critical-path analysis's part of an analysis.
type cpState struct {
	plan *capacity.Plan
	an   *critpath.Analysis // the final join's
	// The departure indexes (critpath.Config.Fast), built while decoding:
	// per channel, the index of the out channel of an instance that marks
	// its in; fast when all of them were built (sorted, and within a
	// quarter of the budget).
	deps   []*critpath.DepIndex
	budget atomic.Int64
	fast   bool
	// costs is the cost model the walk of the visits summed (package
	// cost): grid 0 the capacity windows', grid 1 Mace's (when planned).
	costs *cost.Acc
}

// planDepIndexes says which channels' counters decoding indexes: the out
// channels of the instances that mark their ins (the in channel of one
// that marks no out), when none marks sent (critpath.Config.Fast).
func (a *analysis) planDepIndexes() {
	a.cp.deps, a.cp.fast = nil, false
	if a.cfg.noFastCritPath {
		return
	}
	plan, err := a.critPathPlan()
	if plan == nil || err != nil {
		return
	}
	var outs []int
	for i := range plan.Instances {
		in := &plan.Instances[i]
		if !in.Has(capacity.RoleIn) {
			continue
		}
		if in.Has(capacity.RoleSent) {
			return // its blocks need the next instance's ins: today's path
		}
		outs = append(outs, depChan(in))
	}
	if len(outs) == 0 {
		return
	}
	a.cp.budget.Store(a.cfg.MemBytes / 4)
	a.cp.deps = make([]*critpath.DepIndex, len(a.chans))
	// Indexes that will not fit their quarter in memory (depIndexBytes a
	// departure, the channels' records at most) keep their lines in files
	// from the start, rather than each moving there when the budget ran
	// out, after the others took it: which one that was depended on the
	// decoders' timing, and one that found nothing left gave up the fast
	// path for the whole run.
	var deps uint64
	for _, ch := range outs {
		deps += a.chans[ch].maxRecords
	}
	inFile := deps*depIndexBytes > uint64(a.cfg.MemBytes/4)
	for _, ch := range outs {
		a.cp.deps[ch] = critpath.NewDepIndex(&a.cp.budget, a.critPathDir())
		if inFile {
			a.cp.deps[ch].InFile()
		}
	}
}

// critPathDir is where the critical path's files go (its spilled visits,
// the departure indexes past their budget): --spill, else the output.
func (a *analysis) critPathDir() string {
	if a.cfg.SpillDir != "" {
		return a.cfg.SpillDir
	}
	return a.cfg.Out
}

// depIndexBytes is about what a departure index in memory takes a
// departure (1.8 measured on the bench's counters, 45 MB for 25M). An
// index whose departures take more moves to its file when the budget
// runs out (critpath.DepIndex).
const depIndexBytes = 2

// depChan is the channel of an instance's departures: its out, else
// (a sink) its in.
func depChan(in *capacity.Instance) int {
	if in.Has(capacity.RoleOut) {
		return in.Chans[capacity.RoleOut]
	}
	return in.Chans[capacity.RoleIn]
}

// doneDepIndexes ends the indexes' building after decoding.
func (a *analysis) doneDepIndexes() {
	if a.cp.deps == nil {
		return
	}
	ok := true
	for _, x := range a.cp.deps {
		if x != nil && !x.Done() {
			ok = false
		}
	}
	// An instance with visits that hand nothing on (a filter's, a cut
	// file's) departs at some of its ins, which the index of its outs
	// does not hold: the walk in time order finds its departures.
	for i := range a.cp.plan.Instances {
		in := &a.cp.plan.Instances[i]
		if in.Has(capacity.RoleIn) && in.Has(capacity.RoleOut) &&
			a.chanRecords[in.Chans[capacity.RoleIn]] > a.chanRecords[in.Chans[capacity.RoleOut]] {
			ok = false
		}
	}
	if !ok {
		a.cp.deps = nil
	}
	a.cp.fast = ok
}

func checkCritPathConfig(cfg *Config) error {
	if cfg.Slice == 0 {
		cfg.Slice = DefaultSlice
	}
	if cfg.Slice < 0 {
		return fmt.Errorf("analyze: --slice must be positive, not %s", cfg.Slice)
	}
	return nil
}

// critPathPlan is the plan of operator instances, or nil (no analysis:
// CritPathNote says why).
func (a *analysis) critPathPlan() (*capacity.Plan, error) {
	if a.cfg.NoCriticalPath {
		a.res.CritPathNote = "critical path: not analysed (--no-critical-path)"
		if a.cap.plan == nil || !a.cap.plan.TupleMarks() || a.cfg.testNoCostWalk {
			return nil, nil
		}
		// The capacity analysis and Mace take their costs from the walk
		// of the visits: it runs, its paths and breakdown are not written.
		a.res.CritPathNote = "critical path: not written (--no-critical-path); the operators' visits were still walked for the cost model of capacity and Mace"
	}
	if a.cp.plan != nil {
		return a.cp.plan, nil
	}
	plan := a.cap.plan
	if plan == nil {
		chans := make([]capacity.Channel, len(a.chans))
		for i, c := range a.chans {
			chans[i] = capacity.Channel{Node: c.Node, PID: c.PID, Name: c.Name, Path: c.Path,
				Tuples: c.Role == RoleTuples, ServiceRate: c.Role == RoleCounter && c.Handler == "SERVICERATE",
				Internal: c.Role == RoleReturn, Lineage: c.Role == RoleLineage}
		}
		var err error
		if plan, err = capacity.NewPlan(chans); err != nil {
			// The capacity analysis was skipped (--no-capacity), which is
			// what its error about the same marks tells the user to do.
			a.res.CritPathNote = "critical path: not analysed: " + err.Error()
			return nil, nil
		}
	}
	if !plan.TupleMarks() {
		a.res.CritPathNote = "critical path: no channel marks an operator's in and out (docs/capacity.md: channels named \"OPERATOR in\", \"OPERATOR out\")"
		return nil, nil
	}
	a.cp.plan = plan
	return plan, nil
}

// newCritPath starts the analysis of one join with the channel order rank.
func (a *analysis) newCritPath(rank []int) (*critpath.Analysis, error) {
	plan, err := a.critPathPlan()
	if plan == nil || err != nil {
		return nil, err
	}
	if err := a.checkSlices(); err != nil {
		return nil, err
	}
	chans := make([]critpath.Channel, len(a.chans))
	for i, c := range a.chans {
		inst, role := plan.Role(i)
		chans[i] = critpath.Channel{Inst: inst, Role: role, Proc: a.procOf[i], Name: c.Name,
			Waits: a.notesWaits[i]}
	}
	if a.cp.fast {
		for i := range chans {
			// Reference cycles per cycle of the node: its durations'
			// translation (linear in the cycles).
			const span = 1 << 32
			n := a.chNode[i]
			chans[i].Rate = a.model.DurationIdx(n, 0, n, span).Est / span
			if !(chans[i].Rate > 0) {
				a.cp.fast = false
			}
		}
	}
	insts := make([]critpath.Instance, len(plan.Instances))
	for i := range plan.Instances {
		in := &plan.Instances[i]
		r := -1
		for _, role := range []capacity.Role{capacity.RoleIn, capacity.RoleOut, capacity.RoleSent} {
			if ch := in.Chans[role]; ch >= 0 {
				r = max(r, rank[ch])
			}
		}
		insts[i] = critpath.Instance{Operator: in.Operator, HasIn: in.Has(capacity.RoleIn), HasOut: in.Has(capacity.RoleOut), HasSent: in.Has(capacity.RoleSent),
			Lineage: in.Has(capacity.RoleLineage), Rank: r}
		if a.cp.fast && in.Has(capacity.RoleIn) {
			insts[i].Deps = a.cp.deps[depChan(in)]
		}
	}
	dir := a.critPathDir()
	return critpath.New(critpath.Config{Chans: chans, Insts: insts, Hz: a.model.RefHz(),
		Slice: a.cfg.Slice.Seconds() * a.model.RefHz(), Mem: a.cfg.MemBytes / 8, Workers: a.cfg.Workers, Dir: dir,
		Fast: a.cp.fast, Costs: a.costGrids()})
}

// sliceBytes is what the walk of the visits keeps a slice: its
// accumulator, its candidates' vectors and its rows (about 1.3 KiB
// allocated a slice for a pipeline of two operators, measured).
const sliceBytes = 1 << 10

// checkSlices refuses a run whose slices would not fit half the memory
// budget (the decoders' share is free by the time the walk lays them out):
// the walk keeps one from the run's first tuple record to its last
// departure (critpath.Finish). Without this check one record with a TSC far
// from the others (2^62: a wild counter) made billions of slices, and
// analyze died out of memory; the capacity windows have the same check.
func (a *analysis) checkSlices() error {
	hz := a.model.RefHz()
	if !(hz > 0) || math.IsInf(hz, 0) {
		return fmt.Errorf("analyze: critical path: the reference node %s has no TSC frequency (%g Hz): no slices of --slice %s can be laid out (or give --no-critical-path and --no-capacity)",
			a.model.Ref(), hz, a.cfg.Slice)
	}
	t0, t1 := a.tupleSpan()
	width := max(math.Round(a.cfg.Slice.Seconds()*hz), 1) // as critpath.Finish rounds it
	n := math.Ceil((t1 - t0) / width)
	budget := float64(max(a.cfg.MemBytes/2, 16<<20))
	if n*sliceBytes <= budget {
		return nil
	}
	need := time.Duration(math.Ceil((t1-t0)/hz*sliceBytes/budget)) * time.Second
	return fmt.Errorf("analyze: critical path: the tuple records span %s s: %.0f slices of %s would take %.0f MiB, more than half of --mem-mb; give --slice %s or more",
		strconv.FormatFloat((t1-t0)/hz, 'f', 3, 64), n, a.cfg.Slice, n*sliceBytes/(1<<20), need)
}

// costGrids are the grids the cost model is summed on: the capacity
// windows' (when the capacity analysis has tuples), then Mace's.
func (a *analysis) costGrids() []cost.Grid {
	if a.cap.plan == nil || !a.cap.tupleMark || a.cap.plan != a.cp.plan {
		return nil
	}
	g := []cost.Grid{a.cap.grid}
	if a.mace.cfg != nil {
		g = append(g, a.mace.grid)
	}
	return g
}

// writeCritPath finishes the analysis and writes criticalpath.csv and
// breakdown.csv.
func (a *analysis) writeCritPath() error {
	an := a.cp.an
	if an == nil {
		return nil
	}
	a.cp.an = nil
	// The slices start at the run's first tuple record, as the capacity
	// and Mace windows do; not at a.t0, which a counter channel's first
	// period moves back to when the counter opened (writeThroughput), by
	// as much as it likes (that made billions of slices).
	t0, _ := a.tupleSpan()
	res, err := an.Finish(t0)
	if err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	a.cp.costs = res.Costs
	if a.cfg.NoCriticalPath {
		return nil
	}
	a.res.CritPath = res
	path := filepath.Join(a.cfg.Out, "criticalpath.csv")
	a.res.Files = append(a.res.Files, path)
	if err := writeFile(path, func(w io.Writer) error { return writeCritPathCSV(w, res.Path) }); err != nil {
		return err
	}
	path = filepath.Join(a.cfg.Out, "breakdown.csv")
	a.res.Files = append(a.res.Files, path)
	return writeFile(path, func(w io.Writer) error { return writeBreakdownCSV(w, res.Breakdown) })
}

const critPathCSVHeader = "level,slice,start_s,end_s,kind,name,share,participation,consistent,note\n"

func writeCritPathCSV(w io.Writer, rows []critpath.PathRow) error {
	return writeCSV(w, critPathCSVHeader, rows, func(b []byte, r *critpath.PathRow) []byte {
		b = append(b, r.Level...)
		b = appendInt(b, r.Slice)
		b = appendNum(appendNum(b, r.StartS), r.EndS)
		b = appendCSV(appendCSV(b, r.Kind), r.Name)
		b = appendNum(appendNum(b, r.Share), r.Participation)
		b = strconv.AppendBool(append(b, ','), r.Consistent)
		return appendCSV(b, r.Note)
	})
}

const breakdownCSVHeader = "group,tuples,e2e_mean_us,e2e_bound_us,part,where,mean_us,share,bound_us,total_cycles\n"

func writeBreakdownCSV(w io.Writer, rows []critpath.BreakdownRow) error {
	return writeCSV(w, breakdownCSVHeader, rows, func(b []byte, r *critpath.BreakdownRow) []byte {
		b = append(b, r.Group...)
		b = appendInt(b, r.Tuples)
		b = appendNum(appendNum(b, r.E2EMeanUS), r.E2EBoundUS)
		b = appendCSV(appendCSV(b, r.Part), r.Where)
		b = appendNum(appendNum(appendNum(b, r.MeanUS), r.Share), r.BoundUS)
		return appendInt(b, r.TotalCycles)
	})
}

// writeCSV writes the header, then a line a row (row appends its fields).
func writeCSV[R any](w io.Writer, header string, rows []R, row func([]byte, *R) []byte) error {
	if _, err := io.WriteString(w, header); err != nil {
		return err
	}
	var b []byte
	for i := range rows {
		b = append(row(b[:0], &rows[i]), '\n')
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// appendNum appends a comma and v exactly (the shortest form that reads
// back the same); NaN is an empty field.
func appendNum(b []byte, v float64) []byte {
	b = append(b, ',')
	if math.IsNaN(v) {
		return b
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

func appendInt(b []byte, v int64) []byte { return strconv.AppendInt(append(b, ','), v, 10) }
