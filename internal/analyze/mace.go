package analyze

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/cost"
	"cloudprofiler/internal/mace"
)

// The Mace analysis (package mace) rides on the capacity analysis: the
// same operator marks, the same windows' span, and each instance's cost
// per tuple by the capacity analysis's definition (its mean own service
// time, in to out). Each worker counts the tuples it joins into an
// accumulator of its own (aggregate.go); after the join the merged counts
// give Mace per window, the measured largest latency beside it, and each
// what-if scenario.

// DefaultMaceWindow is Mace's window.
const DefaultMaceWindow = time.Second

// maceState is the Mace analysis's part of an analysis.
type maceState struct {
	cfg     *mace.Config // nil: no Mace analysis
	whatIfs []mace.WhatIf
	costs   map[string]float64 // --mace-costs: another run's, by operator
	acc     *mace.Acc          // the workers' merged counts
	// grid is the cost model's grid on Mace's windows (by the time of
	// each in), each cut in maceCostCells batches.
	grid cost.Grid
}

// maceCostCells is how many cells a Mace window's cost has: the batches
// of its interval, and the eighths whose speeds Mace drains at (on 10 ms
// windows with the other vCPU busy, 4 cells put 91-96% of the windows
// within the theorem's interval, 8 cells 94-99%, 32 cells 92-100%, at 80
// bytes a cell and instance).
const maceCostCells = 8

// checkMaceConfig fills the defaults and refuses bad values (planMace reads
// the what-ifs and --mace-costs).
func checkMaceConfig(cfg *Config) error {
	if cfg.MaceWindow == 0 {
		cfg.MaceWindow = DefaultMaceWindow
	}
	if cfg.MaceWindow < 0 {
		return fmt.Errorf("analyze: --mace-window must be positive, not %s", cfg.MaceWindow)
	}
	if !(cfg.MaceFit >= 0 && cfg.MaceFit <= 1) {
		return fmt.Errorf("analyze: --mace-fit must be a share of the tuples in (0, 1], not %v", cfg.MaceFit)
	}
	return nil
}

// planMace makes Mace's configuration once the capacity windows are known
// (capacityWindows), or says why there is none.
func (a *analysis) planMace() error {
	a.mace = maceState{}
	switch {
	case a.cfg.NoMace:
		a.res.MaceNote = "Mace: not analysed (--no-mace)"
		return nil
	case a.cap.plan == nil:
		a.res.MaceNote = "Mace: not analysed: it takes each operator's cost from the capacity analysis (--no-capacity)"
		return nil
	case !a.cap.tupleMark:
		a.res.MaceNote = "Mace: not analysed: no tuple channel marks an operator (name channels \"OPERATOR in\" and \"OPERATOR out\"; docs/capacity.md)"
		return nil
	}
	var whatIfs []mace.WhatIf
	rates := []float64{1}
	for _, s := range a.cfg.WhatIf {
		w, err := mace.ParseWhatIf(s)
		if err != nil {
			return fmt.Errorf("analyze: %w", err)
		}
		whatIfs = append(whatIfs, w)
		seen := false
		for _, r := range rates {
			seen = seen || r == w.Rate
		}
		if !seen {
			rates = append(rates, w.Rate)
		}
	}
	var costs map[string]float64
	if a.cfg.MaceCosts != "" {
		var err error
		if costs, err = readMaceCosts(a.cfg.MaceCosts); err != nil {
			return err
		}
	}
	plan := a.cap.plan
	chans := make([]mace.Channel, len(a.chans))
	for i := range chans {
		inst, role := plan.Role(i)
		chans[i] = mace.Channel{Inst: inst, Role: role}
	}
	insts := make([]mace.Instance, len(plan.Instances))
	for i := range plan.Instances {
		in := &plan.Instances[i]
		insts[i] = mace.Instance{Operator: in.Operator, Label: in.Label(), Machine: in.Node, HasIn: in.Has(capacity.RoleIn)}
	}
	win := a.cap.win
	hz := a.model.RefHz()
	cfg := &mace.Config{Hz: hz, T0: win.T0, T1: win.T1, Width: a.cfg.MaceWindow.Seconds() * hz, Chans: chans, Insts: insts, Rates: rates}
	// Each worker counts its own: the budget's quarter covers them all.
	if err := cfg.Check(); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	grid := cost.Grid{T0: win.T0, Width: cfg.Width, N: int(math.Max(1, math.Ceil((win.T1-win.T0)/cfg.Width))), Sub: maceCostCells}
	if need := (mace.Bytes(cfg) + cost.Bytes(len(insts), grid)) * int64(a.cfg.Workers); need > max(a.cfg.MemBytes/4, 16<<20) {
		why := fmt.Sprintf("%d windows of %s for %d operator instances on %d workers would take %d MiB, more than a quarter of --mem-mb (%d MiB); give --mem-mb %d or more, or a wider --mace-window",
			int(math.Ceil((win.T1-win.T0)/cfg.Width)), a.cfg.MaceWindow, len(insts), a.cfg.Workers, need>>20, a.cfg.MemBytes>>20, (4*need+1<<20-1)>>20)
		if len(a.cfg.WhatIf) > 0 || a.cfg.MaceCosts != "" {
			return fmt.Errorf("analyze: Mace (asked for by --what-if or --mace-costs): %s", why)
		}
		// Run by default, not asked for: the rest of the analysis goes on.
		a.res.MaceNote = "Mace: not analysed: " + why
		return nil
	}
	a.mace = maceState{cfg: cfg, whatIfs: whatIfs, costs: costs, grid: grid}
	return nil
}

// newMaceAcc is a worker's accumulator (nil: none).
func (a *analysis) newMaceAcc() *mace.Acc {
	if a.mace.cfg == nil {
		return nil
	}
	acc, err := mace.NewAcc(a.mace.cfg)
	if err != nil {
		panic(err) // planMace made one of this configuration
	}
	return acc
}

// writeMace finishes the analysis and writes mace.csv and mace-costs.csv.
func (a *analysis) writeMace() error {
	acc := a.mace.acc
	if acc == nil {
		return nil
	}
	a.mace.acc = nil
	// The cost model the walk of the visits summed (grid 1: Mace's).
	cm := mace.CostModel{Acc: a.cp.costs, Grid: 1}
	if cm.Acc != nil && len(cm.Acc.Grids()) < 2 {
		cm.Acc = nil
	}
	for i := range a.cap.plan.Instances {
		in := &a.cap.plan.Instances[i]
		cm.Opts = append(cm.Opts, cost.Options{Hz: a.model.RefHz(), MinTake: 10, HasSend: in.Has(capacity.RoleSent)})
		f := 1.0
		if a.res.Capacity != nil {
			f = a.res.Capacity.Offered(in.Operator)
		}
		cm.Offered = append(cm.Offered, f)
	}
	res, err := mace.Finish(acc, a.mace.whatIfs, a.mace.costs, a.cfg.MaceFit, cm)
	if err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	a.res.Mace = res
	path := filepath.Join(a.cfg.Out, "mace.csv")
	a.res.Files = append(a.res.Files, path)
	if err := writeFile(path, func(w io.Writer) error { return writeMaceCSV(w, res.Rows) }); err != nil {
		return err
	}
	path = filepath.Join(a.cfg.Out, "mace-costs.csv")
	a.res.Files = append(a.res.Files, path)
	return writeFile(path, func(w io.Writer) error { return writeMaceCostsCSV(w, res.Costs) })
}

const maceCSVHeader = "scenario,window,start_s,end_s,events,mace_s,bound_s,predicted_s,node,tuples,measured_max_s,measured_min_s,within\n"

func writeMaceCSV(w io.Writer, rows []mace.Row) error {
	return writeCSV(w, maceCSVHeader, rows, func(b []byte, r *mace.Row) []byte {
		b = appendCSV(b[:0], r.Scenario)[1:]
		b = appendInt(b, r.Window)
		b = appendNum(appendNum(b, r.StartS), r.EndS)
		b = appendInt(b, r.Events)
		b = appendNum(appendNum(appendNum(b, r.MaceS), r.BoundS), r.PredictedS)
		b = appendCSV(b, r.Node)
		b = appendInt(b, r.Tuples)
		b = appendNum(appendNum(b, r.MeasuredMaxS), r.MeasuredMinS)
		if r.Tuples == 0 {
			return append(b, ',')
		}
		return strconv.AppendBool(append(b, ','), r.Within)
	})
}

const maceCostsCSVHeader = "operator,instance,cost_s,service_s,handoff_s,tuples,from,min_window_cost_s,max_window_cost_s\n"

func writeMaceCostsCSV(w io.Writer, rows []mace.Cost) error {
	return writeCSV(w, maceCostsCSVHeader, rows, func(b []byte, r *mace.Cost) []byte {
		b = appendCSV(b[:0], r.Operator)[1:]
		b = appendCSV(b, r.Instance)
		b = appendNum(appendNum(appendNum(b, r.CostS), r.ServiceS), r.HandOffS)
		b = appendInt(b, int64(r.Tuples))
		b = appendCSV(b, r.From)
		return appendNum(appendNum(b, r.MinS), r.MaxS)
	})
}

// readMaceCosts reads another run's mace-costs.csv: each operator's cost
// per tuple, the mean over its instances with one.
func readMaceCosts(path string) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("analyze: --mace-costs: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("analyze: --mace-costs %s: %w", path, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	op, hasOp := col["operator"]
	cost, hasCost := col["cost_s"]
	if !hasOp || !hasCost {
		return nil, fmt.Errorf("analyze: --mace-costs %s: not a mace-costs.csv (want the columns operator and cost_s; analyze writes it beside mace.csv)", path)
	}
	sum, n := map[string]float64{}, map[string]int{}
	for line := 2; ; line++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("analyze: --mace-costs %s: %w", path, err)
		}
		v, err := strconv.ParseFloat(rec[cost], 64)
		if rec[cost] == "" {
			continue // an instance without a cost
		}
		if err != nil || !(v >= 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("analyze: --mace-costs %s: line %d: cost_s %q is not a number of seconds", path, line, rec[cost])
		}
		sum[rec[op]] += v
		n[rec[op]]++
	}
	if len(sum) == 0 {
		return nil, fmt.Errorf("analyze: --mace-costs %s: no operator with a cost", path)
	}
	costs := map[string]float64{}
	for o, s := range sum {
		costs[o] = s / float64(n[o])
	}
	return costs, nil
}
