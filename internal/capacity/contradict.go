package capacity

import (
	"fmt"
	"math"
	"strings"
)

// The checks of a capacity against what the same run shows. A capacity is
// a claim about what an instance does a second while it has a backlog; the
// run holds three things it must agree with, and a capacity that does not
// is no finding: its rows say why (their note, "contradicted: ..."), the
// result lists it (Contradictions), and a bottleneck it would name is held
// back (BottleneckDoubt) instead of printed.
//
//  1. What it carried: no instance takes more tuples a second than it can,
//     in any window (each window's own capacity: the machine's speed moves
//     between windows) nor over the run.
//  2. What its thread did, where its records note its waits: the share of
//     the time it worked is its load (the utilization law: arrivals times
//     the cost of a tuple); a load near 1 on an instance that worked a
//     small part of the run, or a small load on one that worked all of it,
//     is a cost that is not what the tuples cost.
//  3. Its neighbour: a bottleneck whose downstream operator was saturated
//     while it was not is held by that operator, not limiting.

// carriedSlack: a window's tuples per second may pass its capacity by this
// much before it counts (a visit that straddles the window's edge counts
// in one window, its time in two).
const carriedSlack = 1.05

// utilFactor: the load and the worked share may differ by this factor
// (either way) and by utilMargin of the run before it counts, where both
// are at least utilFloor. The margin: a lightly loaded instance on a
// shared machine has its preemptions between tuples counted as work (a
// preempted thread did not wait), which doubles a small worked share
// without a word against its cost (test-multinode's map: load 0.09,
// worked 17%, its capacity 58,724/s inside its truth of 58,305-60,194/s).
const (
	utilFactor = 2.0
	utilMargin = 0.2
	utilFloor  = 0.05
)

// minCarried: the fewest tuples a row must hold for check 1.
const minCarried = 100

// Contradiction is a capacity the run contradicts.
type Contradiction struct {
	Operator, Instance string // Instance "" for the operator's own row
	Window             int64  // -1: the run
	Text               string
}

func (m *maker) contradict(r *Row, text string) {
	addNote(r, "contradicted: "+text)
	m.res.Contradictions = append(m.res.Contradictions, Contradiction{Operator: r.Operator, Instance: r.Instance, Window: r.Window, Text: text})
}

// contradictions checks every in/out row's capacity (after topology: the
// loads are the offered ones).
func (m *maker) contradictions() {
	for i := range m.res.Rows {
		r := &m.res.Rows[i]
		if r.Method != MethodInOut || math.IsNaN(r.Capacity) || !(r.Capacity > 0) {
			continue
		}
		// 1. Carried: tuples it took a second against its capacity's
		// upper end (its interval's, where it has one).
		hi := r.Capacity
		if !math.IsNaN(r.CapacityHigh) && !math.IsInf(r.CapacityHigh, 1) {
			hi = max(hi, r.CapacityHigh)
		}
		secs := r.EndS - r.StartS
		if r.Level == "instance" && secs > 0 && r.TuplesIn >= int64(max(m.cfg.MinTuples, minCarried)) {
			if took := float64(r.TuplesIn) / secs; took > carriedSlack*hi {
				upTo := ""
				if hi > r.Capacity {
					upTo = fmt.Sprintf(" (the highest its interval allows: %.0f/s)", hi)
				}
				m.contradict(r, fmt.Sprintf("it took %.0f tuples/s%s, above its capacity of %.0f/s%s: "+
					"the cost counted time that was not its work", took, windowText(r), r.Capacity, upTo))
				continue
			}
		}
		// 2. Its load against the share of the time its thread worked.
		if r.Level == "instance" && r.Window == -1 {
			load, busy := math.Min(r.Load, 1), r.BusyShare
			if ii := m.instanceIndex(r); ii >= 0 && ii < len(m.cfg.Notes) && m.cfg.Notes[ii] && load >= utilFloor && busy >= utilFloor &&
				math.Abs(load-busy) >= utilMargin && (load > utilFactor*busy || busy > utilFactor*load) {
				m.contradict(r, fmt.Sprintf("its load is %.2f but its thread worked %.0f%% of the run (a load is the share of its time the tuples offered to it cost): "+
					"the cost is not what its tuples cost", r.Load, 100*busy))
			}
		}
	}
	// 3. The bottleneck and its downstream neighbour.
	if m.res.Bottleneck == "" || m.flows == nil {
		return
	}
	oi := -1
	for i, op := range m.p.Operators {
		if op.Name == m.res.Bottleneck {
			oi = i
		}
	}
	if oi < 0 || m.opRow[oi] < 0 {
		return
	}
	if y := m.flows[oi].Next; y >= 0 && y != oi && m.opRow[y] >= 0 {
		b, d := &m.res.Rows[m.opRow[oi]], &m.res.Rows[m.opRow[y]]
		if d.Load >= 0.95 && b.Load < 0.8 {
			m.contradict(b, fmt.Sprintf("%s, downstream of it, was saturated (load %.2f) while it was not (load %.2f): %s is held back by it, not the limit",
				d.Operator, d.Load, b.Load, b.Operator))
		}
	}
	// Only the run's own rows hold the bottleneck back: a window's capacity
	// rests on a second's tuples, and a pause of the process inside it
	// (a collection of a JVM's) can tip it.
	var why []string
	for _, c := range m.res.Contradictions {
		if c.Operator == m.res.Bottleneck && c.Window < 0 {
			why = append(why, c.Text)
		}
	}
	if len(why) > 0 {
		// Named nowhere: not in the row's bottleneck column, the text's
		// table, the report's capacity section, nor the highest source
		// rate the topology sustains, which is its.
		m.res.BottleneckDoubt = fmt.Sprintf("%s has the lowest capacity, but the run contradicts it: %s", m.res.Bottleneck, strings.Join(why, "; "))
		m.res.Rows[m.opRow[oi]].Bottleneck = false
		m.res.Bottleneck, m.res.MaxSource = "", math.NaN()
	}
}

// windowText says which window a row is of, for a sentence.
func windowText(r *Row) string {
	if r.Window < 0 {
		return " over the run"
	}
	return fmt.Sprintf(" in window %d (%.3g..%.3g s)", r.Window, r.StartS, r.EndS)
}

// instanceIndex is the plan's index of an instance row's instance (-1: none).
func (m *maker) instanceIndex(r *Row) int {
	for ii := range m.p.Instances {
		in := &m.p.Instances[ii]
		if in.Operator == r.Operator && in.Label() == r.Instance {
			return ii
		}
	}
	return -1
}
