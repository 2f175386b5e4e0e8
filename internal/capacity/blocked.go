package capacity

// The order of marks, for logs without the notes of waits: where an
// instance's records do not say whether its thread waited between a
// departure and its next in (a library without rseq, CP_WAITS=off, logs of
// older builds), a saturated downstream stands in for the time it was
// blocked. An instance that notes its waits needs none of this: its cost
// model left its blocked takes out already (package cost, Visit.taken).

import (
	"fmt"

	"cloudprofiler/internal/cost"
)

// downstreamSaturated finds, for each operator, the cells of the run
// where the operator its copies go to held it back. That operator was
// saturated there (every instance of it with visits in the cell spent at
// least SaturatedBusy of it serving its backlog or waiting for room in its
// own full downstream: either way it took no input, and a Flink job's cell
// where the sink held the receiver back a quarter of the time had its
// sender's blocked takes counted as its cost), and over those cells
// this operator went no faster while backlogged than that one departed
// (paced: at most pacedFactor times its departures, copies counted). Its
// take there is then the time its full output kept it from taking the
// next tuple: in Flink and Storm an operator whose output buffers are
// full stops taking input, and the wait lands between its departure and
// its next in, sent marked or not. A sender much faster than its saturated
// receiver (over UDP, or with room downstream) is not paced, and its take
// stands. The pace is taken over all those cells together (one cell's
// rate, summed over instances that each wait part of it, swings by 2-3x);
// the cells, not windows, since a window where the receiver filled up
// halfway holds both kinds of take.
func (m *maker) downstreamSaturated() {
	m.blocked = make([][]bool, len(m.p.Operators))
	if m.acc == nil || m.costs == nil {
		return
	}
	m.flows = m.acc.topology().flows()
	g := m.costs.Grids()[0]
	cells := g.N * g.Sub
	cw := g.Width / float64(g.Sub)
	runEnd := g.T0 + m.runS*m.cfg.Hz
	// span is cell ci's part of the run (the last cell ends with the
	// records), cycles.
	span := func(ci int) float64 {
		from := g.T0 + float64(ci)*cw
		return max(0, min(from+cw, runEnd)-from)
	}
	sat := make([][]bool, len(m.p.Operators))
	visits := make([]float64, len(m.p.Operators))
	for oi, op := range m.p.Operators {
		sat[oi] = make([]bool, cells)
		for ci := range sat[oi] {
			sp := span(ci)
			any, all := false, sp > 0
			for _, ii := range op.Instances {
				c := &m.costs.Cells(0, ii)[ci]
				visits[oi] += float64(c.Visits)
				if c.Visits == 0 {
					continue
				}
				any = true
				all = all && float64(c.Busy+c.Blocked) >= SaturatedBusy*sp
			}
			sat[oi][ci] = any && all
		}
	}
	for oi, op := range m.p.Operators {
		y := m.flows[oi].Next
		// A link that lost copies did not block its sender: a full
		// receiver dropped them (UDP), and the sender's take is its own.
		// An operator that notes its thread's waits had its blocked takes
		// left out of its cost already (package cost, Visit.taken).
		if y < 0 || y == oi || m.flows[oi].Lost > 0 || visits[oi] == 0 || m.notes(oi) {
			continue
		}
		// Over the cells where y was saturated: y's departures per second
		// (its visits), and this operator's backlogged rate, the sum over
		// its instances of backlogged tuples per second of backlogged
		// time (own work and take).
		var yVisits, secs float64
		var takeN uint64
		rate := 0.0
		any := false
		for ci, s := range sat[y] {
			if !s {
				continue
			}
			any = true
			secs += span(ci) / m.cfg.Hz
			for _, ii := range m.p.Operators[y].Instances {
				yVisits += float64(m.costs.Cells(0, ii)[ci].Visits)
			}
		}
		if !any || secs == 0 {
			continue
		}
		for _, ii := range op.Instances {
			var n uint64
			var t int64
			for ci, s := range sat[y] {
				if c := &m.costs.Cells(0, ii)[ci]; s {
					n += uint64(c.TakeN)
					t += c.BOwn + c.Take
				}
			}
			if n > 0 && t > 0 {
				rate += float64(n) / (float64(t) / m.cfg.Hz)
				takeN += n
			}
		}
		// Copies: the receiver's visits per visit of the sender.
		q := visits[y] / visits[oi]
		if takeN < uint64(m.cfg.MinTake) || rate*q > pacedFactor*yVisits/secs {
			continue
		}
		m.blocked[oi] = append([]bool(nil), sat[y]...)
	}
}

// SaturatedBusy is the share of a cell an instance spends serving its
// backlog (or blocked by its downstream) from which it counts as
// saturated there (holding its senders back).
const SaturatedBusy = 0.75

// pacedFactor: a sender whose backlogged rate is within this factor of
// what its saturated receiver departed is held back by it.
const pacedFactor = 2

// countActive counts the cells not blocked in which operator oi's
// instances took tuples while backlogged.
func (m *maker) countActive(oi int, blocked []bool) int {
	k := 0
	for ci, b := range blocked {
		if b {
			continue
		}
		for _, ii := range m.p.Operators[oi].Instances {
			if m.costs.Cells(0, ii)[ci].TakeN > 0 {
				k++
				break
			}
		}
	}
	return k
}

// unblockedCells is instance ii's cost cells with the take left out where
// its downstream held operator oi back: there the take cannot be told from
// time blocked (an operator that stops taking input while its output is
// full shows it in its take, sent marked or not), and the other cells'
// take stands in.
func (m *maker) unblockedCells(oi, ii int) []cost.Cell {
	cells := m.costs.Cells(0, ii)
	blocked := m.blocked[oi]
	if blocked == nil {
		return cells
	}
	cells = append([]cost.Cell(nil), cells...)
	for c, b := range blocked {
		if b {
			cells[c].Take, cells[c].TakeN, cells[c].BOwn = 0, 0, 0
		}
	}
	return cells
}

// blockedNote says where operator oi's downstream held it back ("": nowhere).
func (m *maker) blockedNote(oi int) string {
	blocked := m.blocked[oi]
	if blocked == nil {
		return ""
	}
	k := 0
	for _, b := range blocked {
		if b {
			k++
		}
	}
	down := m.p.Operators[m.flows[oi].Next].Name
	g := m.costs.Grids()[0]
	cell := fmt.Sprintf("%.3g s", g.Width/float64(g.Sub)/m.cfg.Hz)
	if k == len(blocked) || m.countActive(oi, blocked) == 0 {
		return fmt.Sprintf("%s, downstream, was saturated and held it back wherever it had a backlog (%d spans of %s): taking the next tuple cannot be told from time blocked by it, so the hand-off is left out and the capacity is an upper bound", down, k, cell)
	}
	return fmt.Sprintf("%s, downstream, was saturated and held it back in %d spans of %s out of %d: there taking the next tuple cannot be told from time blocked by it, and the take elsewhere stands in", down, k, cell, len(blocked))
}
