package mace

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// WhatIf is one scenario: the measured run with changes.
type WhatIf struct {
	Name     string             // as given
	Rate     float64            // arrival-rate multiplier (1: as measured)
	Cost     map[string]float64 // operator -> its cost's multiplier
	Colocate [][]string         // groups of operators whose instances share one node
}

// Measured is the scenario of the run as it was.
var Measured = WhatIf{Name: "measured", Rate: 1}

// ParseWhatIf reads one --what-if: changes separated by ';', each
// rate=xR (or rate=R), cost:OP=F, colocate:A,B[,C...].
func ParseWhatIf(s string) (WhatIf, error) {
	w := WhatIf{Name: strings.TrimSpace(s), Rate: 1}
	if w.Name == "" {
		return w, fmt.Errorf("--what-if: empty; give rate=x2, cost:OP=0.5 or colocate:A,B")
	}
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		switch {
		case strings.HasPrefix(part, "rate="):
			v := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(part, "rate="), "x"), "x")
			r, err := strconv.ParseFloat(v, 64)
			if err != nil || !(r > 0) || math.IsInf(r, 0) {
				return w, fmt.Errorf("--what-if %q: rate=%s: want a multiplier above 0 (rate=x2: twice the input rate)", s, v)
			}
			w.Rate *= r
		case strings.HasPrefix(part, "cost:"):
			op, v, ok := strings.Cut(strings.TrimPrefix(part, "cost:"), "=")
			f, err := strconv.ParseFloat(v, 64)
			if !ok || op == "" || err != nil || !(f >= 0) || math.IsInf(f, 0) {
				return w, fmt.Errorf("--what-if %q: %s: want cost:OPERATOR=FACTOR (cost:B=0.5: B's cost per tuple halved)", s, part)
			}
			if w.Cost == nil {
				w.Cost = map[string]float64{}
			}
			w.Cost[op] = f
		case strings.HasPrefix(part, "colocate:"):
			ops := strings.Split(strings.TrimPrefix(part, "colocate:"), ",")
			for _, op := range ops {
				if op == "" {
					return w, fmt.Errorf("--what-if %q: %s: want colocate:A,B (operators A and B on one CPU)", s, part)
				}
			}
			if len(ops) < 2 {
				return w, fmt.Errorf("--what-if %q: %s: colocate needs two operators or more", s, part)
			}
			w.Colocate = append(w.Colocate, ops)
		default:
			return w, fmt.Errorf("--what-if %q: %q: want rate=xR, cost:OP=F or colocate:A,B (several: separated by ';')", s, part)
		}
	}
	return w, nil
}

// check says whether the scenario's operators are the run's.
func (w *WhatIf) check(ops map[string]bool) error {
	for op := range w.Cost {
		if !ops[op] {
			return fmt.Errorf("--what-if %q: no operator %q in the run (operators: %s)", w.Name, op, opList(ops))
		}
	}
	for _, g := range w.Colocate {
		for _, op := range g {
			if !ops[op] {
				return fmt.Errorf("--what-if %q: no operator %q in the run (operators: %s)", w.Name, op, opList(ops))
			}
		}
	}
	return nil
}

func opList(ops map[string]bool) string {
	var l []string
	for op := range ops {
		l = append(l, op)
	}
	sortStrings(l)
	return strings.Join(l, ", ")
}
