package analyze

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"time"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/cost"
	"cloudprofiler/internal/logfile"
)

// The capacity analysis (package capacity) rides on the pipeline: the plan
// comes from the channels' names when the analysis is prepared; decoding
// notes each tuple channel's smallest and largest TSC, which, translated,
// give the run's first and last record exactly (translation is monotone on
// each node), so the windows start at the run's first record whatever the
// workers and the order they joined partitions in; each worker feeds every
// tuple it joins, its records in hop order, to an accumulator of its own
// (aggregate.go), merged at the end; the count channels are read last, and
// the rows written as capacity.parquet and capacity.csv. Nothing of it runs
// when no channel marks an operator, or with Config.NoCapacity.

// Defaults of the capacity analysis.
const (
	DefaultWindow    = time.Second
	DefaultMinTuples = 30
)

// capState is the capacity analysis's part of an analysis.
type capState struct {
	plan      *capacity.Plan // nil: no capacity analysis
	tupleMark bool           // some tuple channel marks: tuples are fed
	win       capacity.Windows
	acc       *capacity.Acc // the workers' merged accumulator
	// grid is the cost model's grid on the capacity windows (package
	// cost; the critical-path analysis's walk of the visits sums it):
	// each window cut into costCells batches for the intervals.
	grid cost.Grid
}

// costCells is how many batches a capacity window's cost interval takes.
const costCells = 8

// checkCapacityConfig fills the defaults and refuses bad values.
func checkCapacityConfig(cfg *Config) error {
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Window < 0 {
		return fmt.Errorf("analyze: --window must be positive, not %s", cfg.Window)
	}
	if cfg.MinTuples == 0 {
		cfg.MinTuples = DefaultMinTuples
	}
	if cfg.MinTuples < 0 {
		return fmt.Errorf("analyze: --min-tuples must be at least 1, not %d", cfg.MinTuples)
	}
	if cfg.TargetRate < 0 || math.IsNaN(cfg.TargetRate) || math.IsInf(cfg.TargetRate, 0) {
		return fmt.Errorf("analyze: --target-rate must be a positive rate (tuples per second), not %v", cfg.TargetRate)
	}
	return nil
}

// planCapacity reads the naming rule of every channel (an error when two
// channels mark the same instance and role).
func (a *analysis) planCapacity() error {
	if a.cfg.NoCapacity {
		a.res.CapacityNote = "capacity: not analysed (--no-capacity)"
		return nil
	}
	chans := make([]capacity.Channel, len(a.chans))
	for i, c := range a.chans {
		chans[i] = capacity.Channel{Node: c.Node, PID: c.PID, Name: c.Name, Path: c.Path,
			Tuples: c.Role == RoleTuples, ServiceRate: c.Role == RoleCounter && c.Handler == "SERVICERATE", Internal: c.Role == RoleReturn,
			Lineage: c.Role == RoleLineage}
	}
	plan, err := capacity.NewPlan(chans)
	if err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	if !plan.Marked() {
		a.res.CapacityNote = capacity.NoMarks
		for _, s := range plan.Ignored {
			a.res.CapacityNote += "\n  not used: " + s
		}
		return nil
	}
	a.cap.plan, a.cap.tupleMark = plan, plan.TupleMarks()
	return nil
}

// capacityWindows finds the run's first and last tuple record in the
// reference counter, from the decoders' smallest and largest TSC per
// channel, and the windows; the accumulators the workers will take must
// fit in a quarter of the memory budget (the decoders' half is free by
// then).
func (a *analysis) capacityWindows() error {
	if !a.cap.tupleMark {
		return nil
	}
	t0, t1 := a.tupleSpan()
	width := a.cfg.Window.Seconds() * a.model.RefHz()
	win, err := capacity.NewWindows(t0, t1, width)
	if err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	insts := int64(len(a.cap.plan.Instances))
	grid := cost.Grid{T0: win.T0, Width: win.Width, N: win.N, Sub: costCells}
	per := insts*int64(win.N)*capacity.CellBytes + cost.Bytes(int(insts), grid)
	budget := max(a.cfg.MemBytes/4, 16<<20)
	if per*int64(a.cfg.Workers) > budget {
		need := time.Duration(math.Ceil(float64(insts*int64(a.cfg.Workers)*(capacity.CellBytes+costCells*cost.CellBytes))*(t1-t0)/a.model.RefHz()/float64(budget))) * time.Second
		return fmt.Errorf("analyze: capacity: the tuple records span %s s: %d windows of %s for %d operator instances on %d workers would take %d MiB, "+
			"more than a quarter of --mem-mb; give --window %s or more, or --no-capacity",
			strconv.FormatFloat((t1-t0)/a.model.RefHz(), 'f', 3, 64), win.N, a.cfg.Window, insts, a.cfg.Workers,
			per*int64(a.cfg.Workers)>>20, need)
	}
	a.cap.win, a.cap.grid = win, grid
	return nil
}

// newCapacityAcc is a worker's accumulator (nil: none).
func (a *analysis) newCapacityAcc() *capacity.Acc {
	if !a.cap.tupleMark {
		return nil
	}
	return capacity.NewAcc(a.cap.plan, a.cap.win)
}

// writeCapacity reads the count channels, makes the rows and writes
// capacity.parquet and capacity.csv.
func (a *analysis) writeCapacity() error {
	plan := a.cap.plan
	if plan == nil {
		return nil
	}
	counts := make([]*capacity.CountSeries, len(plan.Instances))
	cmin, cmax := math.Inf(1), math.Inf(-1)
	for ii := range plan.Instances {
		ch := plan.Instances[ii].Chans[capacity.RoleCount]
		if ch < 0 {
			continue
		}
		c := a.chans[ch]
		lf, err := logfile.Open(c.Path)
		if err != nil {
			return err
		}
		node := a.chNode[ch]
		s, err := capacity.ReadCount(lf, func(tsc uint64) float64 { return a.model.PointRelIdx(node, tsc).Est })
		err = c.ReadDone(lf, err)
		lf.Close()
		if err != nil {
			return err
		}
		counts[ii] = s
		for _, p := range s.Periods {
			cmin, cmax = math.Min(cmin, p.Start), math.Max(cmax, p.End)
		}
		for _, e := range s.Estimates {
			cmin, cmax = math.Min(cmin, e.Est), math.Max(cmax, e.Est)
		}
	}
	win := a.cap.win
	if !a.cap.tupleMark {
		// Count channels only: their records make the run.
		if math.IsInf(cmin, 1) {
			cmin, cmax = 0, 0
		}
		var err error
		if win, err = capacity.NewWindows(cmin, cmax, a.cfg.Window.Seconds()*a.model.RefHz()); err != nil {
			return fmt.Errorf("analyze: %w", err)
		}
	}
	var costs *cost.Acc
	if a.cap.tupleMark {
		costs = a.cp.costs
	}
	notes := make([]bool, len(plan.Instances))
	for i := range plan.Instances {
		if ch := plan.Instances[i].Chans[capacity.RoleIn]; ch >= 0 {
			notes[i] = a.notesWaits[ch]
		}
	}
	res := plan.Rows(a.cap.acc, win, counts, costs, capacity.Config{Hz: a.model.RefHz(), MinTuples: a.cfg.MinTuples,
		TargetRate: a.cfg.TargetRate, Rank: a.rank, NoCostModel: a.noCostModel, Notes: notes})
	a.res.Capacity = res
	if err := writeTable(a, "capacity.parquet", res.Rows); err != nil {
		return err
	}
	path := filepath.Join(a.cfg.Out, "capacity.csv")
	a.res.Files = append(a.res.Files, path)
	return writeFile(path, func(w io.Writer) error { return writeCapacityCSV(w, res.Rows) })
}

// capacityCSVHeader is capacity.csv's first line: capacity.Row's columns.
const capacityCSVHeader = "level,window,start_s,end_s,operator,instance,node,pid,method,tuples_in,tuples_out,arrivals_per_s," +
	"departures_per_s,busy_share,blocked_share,own_us,handoff_us,cost_us,cost_low_us,cost_high_us,backlogged," +
	"service_rate,service_rate_low,service_rate_high,capacity,capacity_low,capacity_high,load,headroom,selectivity," +
	"instances,skew,reach,lost,max_source_rate,bottleneck,parallelism_needed,note\n"

// writeCapacityCSV writes capacity.csv: the header, then the rows. A NaN
// is an empty field (every CSV reader takes it for missing), numbers are
// exact (the shortest form that reads back the same), infinities +Inf and
// -Inf, bottleneck true or false.
func writeCapacityCSV(w io.Writer, rows []capacity.Row) error {
	return writeCSV(w, capacityCSVHeader, rows, func(b []byte, r *capacity.Row) []byte {
		b = append(b, r.Level...)
		b = appendInt(b, r.Window)
		b = appendNum(appendNum(b, r.StartS), r.EndS)
		b = appendCSV(appendCSV(appendCSV(b, r.Operator), r.Instance), r.Node)
		b = appendInt(b, r.PID)
		b = appendCSV(b, r.Method)
		b = appendInt(appendInt(b, r.TuplesIn), r.TuplesOut)
		for _, v := range []float64{r.ArrivalsPerS, r.DeparturesPerS, r.BusyShare, r.BlockedShare, r.OwnUS, r.HandOffUS, r.CostUS, r.CostLowUS, r.CostHighUS} {
			b = appendNum(b, v)
		}
		b = appendInt(b, r.Backlogged)
		for _, v := range []float64{r.ServiceRate, r.ServiceRateLow, r.ServiceRateHigh, r.Capacity, r.CapacityLow, r.CapacityHigh, r.Load, r.Headroom, r.Selectivity} {
			b = appendNum(b, v)
		}
		b = appendInt(b, r.Instances)
		b = appendNum(appendNum(b, r.Skew), r.Reach)
		b = appendInt(b, r.Lost)
		b = appendNum(b, r.MaxSourceRate)
		b = strconv.AppendBool(append(b, ','), r.Bottleneck)
		b = appendInt(b, r.ParallelismNeeded)
		return appendCSV(b, r.Note)
	})
}
