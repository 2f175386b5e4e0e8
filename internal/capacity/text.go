package capacity

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// NoMarks is what the summary says when no channel marks an operator.
const NoMarks = `capacity: no channel marks an operator, so there are no service rates, busy shares or bottleneck. ` +
	`Name a channel "OPERATOR in" where an operator takes a tuple from its input and "OPERATOR out" where it ` +
	`hands it on (optionally "OPERATOR sent" when the hand-off returned; "OPERATOR#INSTANCE in" ... for each ` +
	`of several instances in one process; "OPERATOR count" for a CP_SERVICERATE counter channel)`

// rate formats a rate for people.
func rate(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.IsInf(v, 1):
		return "inf"
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func share(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func us(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	if math.Abs(v) >= 1000 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// WriteText writes the summary's capacity section: per operator (and per
// instance when it has several) over the whole run, its cost per tuple and
// capacity, the bottleneck and the highest source rate the topology
// sustains, what the bottleneck carried while saturated, the parallelism
// each operator needs for the target rate, and what is missing or moved.
func (res *Result) WriteText(w io.Writer) error {
	cfg := res.Config
	windows := fmt.Sprintf("%d windows", res.Windows.N)
	if res.Windows.N == 1 {
		windows = "1 window"
	}
	fmt.Fprintf(w, "capacity (capacity.csv has every window): windows of %s s from t0, the run's first tuple record (%s); "+
		"cost = a tuple's own work (in to out) + its hand-off (the send where sent is marked, and taking the next tuple while backlogged); "+
		"capacity = 1 / cost: the tuples an instance takes a second while backlogged, with its 95%% interval (jackknife over batches of the run); "+
		"load = offered rate / capacity; fewer than %d tuples: not enough data\n",
		strconv.FormatFloat(res.Windows.Width/cfg.Hz, 'g', -1, 64), windows, cfg.MinTuples)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "operator\tinstances\tmethod\tarrivals/s\town us\thand-off us\tcost us\tcapacity/s\t95% interval\tload\tselectivity\treach\tlost\tmax source/s\t"
	if cfg.TargetRate > 0 {
		head += "parallelism\t"
	}
	fmt.Fprintln(tw, head)
	perOp := map[string]int{}
	for _, r := range res.Rows {
		if r.Level == "instance" && r.Window == -1 && r.Method == MethodInOut {
			perOp[r.Operator]++
		}
	}
	for _, r := range res.Rows {
		if r.Window != -1 || (r.Level == "instance" && (r.Method != MethodInOut || perOp[r.Operator] < 2)) {
			continue
		}
		name, inst := r.Operator, fmt.Sprintf("%d", r.Instances)
		if r.Level == "instance" {
			name, inst = "", r.Instance
		} else if r.Instances > 1 && !math.IsNaN(r.Skew) {
			inst += fmt.Sprintf(" (skew %.2f)", r.Skew)
		}
		capa, lo, hi := r.Capacity, r.CapacityLow, r.CapacityHigh
		if r.Method == MethodBC {
			capa, lo, hi = r.ServiceRate, r.ServiceRateLow, r.ServiceRateHigh
		}
		ci := "-"
		if !math.IsNaN(lo) {
			ci = rate(lo) + " .. " + rate(hi)
		}
		reach, maxs, lost := share(r.Reach), rate(r.MaxSourceRate), "-"
		if r.Bottleneck {
			maxs += " *"
		}
		if r.Level == "operator" && r.Method == MethodInOut && !math.IsNaN(r.Reach) {
			lost = strconv.FormatInt(r.Lost, 10)
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t", name, inst, r.Method, rate(r.ArrivalsPerS),
			us(r.OwnUS), us(r.HandOffUS), us(r.CostUS), rate(capa), ci, share(r.Load), share(r.Selectivity), reach, lost, maxs)
		if cfg.TargetRate > 0 {
			p := "-"
			if r.ParallelismNeeded > 0 {
				p = strconv.FormatInt(r.ParallelismNeeded, 10)
			}
			line += p + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if res.BottleneckDoubt != "" {
		fmt.Fprintf(w, "bottleneck: not named: %s\n", res.BottleneckDoubt)
	} else if res.Bottleneck != "" {
		offered := ""
		for _, r := range res.Rows {
			if r.Bottleneck && !math.IsNaN(r.Load) {
				offered = fmt.Sprintf("; the run offered %s tuples/s at the source (load %.2f there)", rate(res.SourceRate), r.Load)
			}
		}
		fmt.Fprintf(w, "bottleneck: %s (*): the highest source rate the topology sustains is %s tuples/s "+
			"(its capacity over its reach)%s\n", res.Bottleneck, rate(res.MaxSource), offered)
		if res.Saturated > 0 {
			fmt.Fprintf(w, "  %s was saturated (%.0f%% or more of its tuples taken while backlogged) in %d of %d windows: there it took %s tuples/s, "+
				"%s/s at the source, against the %s/s predicted\n", res.Bottleneck, 100*SaturatedShare, res.Saturated, res.Windows.N,
				rate(res.CarriedRate), rate(res.CarriedSource), rate(res.MaxSource))
		} else {
			fmt.Fprintf(w, "  %s was never saturated in a window: the highest rate is predicted from its cost, not seen\n", res.Bottleneck)
		}
	} else if res.HasCosts {
		fmt.Fprintln(w, "bottleneck: none found (no operator has a capacity and arrivals: mark both its in and out)")
	} else {
		fmt.Fprintln(w, "bottleneck: none found (no cost model: the operators' visits were not walked)")
	}
	if res.Lost > 0 {
		fmt.Fprintf(w, "  lost: %d tuples left an operator and never reached the next (the lost column); they are not counted as filtered\n", res.Lost)
	}
	if cfg.TargetRate > 0 {
		var parts []string
		for _, r := range res.Rows {
			if r.Level == "operator" && r.Window == -1 && r.Method == MethodInOut && r.ParallelismNeeded > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", r.Operator, r.ParallelismNeeded))
			}
		}
		if len(parts) == 0 {
			parts = []string{"none known (no operator has a capacity)"}
		}
		fmt.Fprintf(w, "parallelism for a source rate of %s tuples/s (DS2: ceil(rate x reach / mean instance capacity)): %s\n",
			rate(cfg.TargetRate), strings.Join(parts, ", "))
	}
	for _, s := range res.Moved {
		fmt.Fprintf(w, "  cost moved: %s\n", s)
	}
	for _, s := range res.Disagree {
		fmt.Fprintf(w, "  disagree: %s\n", s)
	}
	for _, c := range res.Contradictions {
		who := c.Operator
		if c.Instance != "" {
			who += " " + c.Instance
		}
		if c.Window >= 0 {
			who += fmt.Sprintf(" (window %d)", c.Window)
		}
		fmt.Fprintf(w, "  contradicted: %s: %s\n", who, c.Text)
	}
	for _, r := range res.Rows {
		if r.Window == -1 && r.Note != "" && (r.Level == "operator" || perOp[r.Operator] > 1 || r.Method != MethodInOut) {
			who := r.Operator
			if r.Level == "instance" {
				who += " " + r.Instance
			}
			fmt.Fprintf(w, "  %s (%s): %s\n", who, r.Method, r.Note)
		}
	}
	if res.Negative > 0 {
		fmt.Fprintf(w, "  %d tuples whose out came before their in were left out of the service times\n", res.Negative)
	}
	for _, s := range res.Ignored {
		fmt.Fprintf(w, "  not used: %s\n", s)
	}
	return nil
}
