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

// WriteText writes the summary's capacity section: per operator (and per
// instance when it has several) over the whole run, the bottleneck and the
// highest source rate the topology is predicted to sustain, the
// parallelism each operator needs for the target rate, and what is missing.
func (res *Result) WriteText(w io.Writer) error {
	cfg := res.Config
	windows := fmt.Sprintf("%d windows", res.Windows.N)
	if res.Windows.N == 1 {
		windows = "1 window"
	}
	fmt.Fprintf(w, "capacity (capacity.csv has every window): windows of %s s from t0, the run's first tuple record (%s); "+
		"service rate = tuples / their own service time (in to out), with its 95%% interval; fewer than %d paired tuples: not enough data\n",
		strconv.FormatFloat(res.Windows.Width/cfg.Hz, 'g', -1, 64), windows, cfg.MinTuples)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "operator\tinstances\tmethod\tarrivals/s\tservice rate/s\t95% interval\tbusy\tblocked\theadroom\tselectivity\treach\tmax source/s\t"
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
		ci := "-"
		if !math.IsNaN(r.ServiceRateLow) {
			ci = rate(r.ServiceRateLow) + " .. " + rate(r.ServiceRateHigh)
		}
		reach, maxs := share(r.Reach), rate(r.MaxSourceRate)
		if r.Bottleneck {
			maxs += " *"
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t", name, inst, r.Method, rate(r.ArrivalsPerS),
			rate(r.ServiceRate), ci, share(r.BusyShare), share(r.BlockedShare), share(r.Headroom), share(r.Selectivity), reach, maxs)
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
	if res.Bottleneck != "" {
		fmt.Fprintf(w, "bottleneck: %s (*): the highest source rate the topology is predicted to sustain is %s tuples/s "+
			"(its capacity over the share of tuples that reach it)\n", res.Bottleneck, rate(res.MaxSource))
	} else {
		fmt.Fprintln(w, "bottleneck: none found (no operator has a service rate and arrivals: mark both its in and out)")
	}
	if cfg.TargetRate > 0 {
		var parts []string
		for _, r := range res.Rows {
			if r.Level == "operator" && r.Window == -1 && r.Method == MethodInOut && r.ParallelismNeeded > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", r.Operator, r.ParallelismNeeded))
			}
		}
		if len(parts) == 0 {
			parts = []string{"none known (no operator has a service rate)"}
		}
		fmt.Fprintf(w, "parallelism for a source rate of %s tuples/s (DS2: ceil(rate x reach / mean instance service rate)): %s\n",
			rate(cfg.TargetRate), strings.Join(parts, ", "))
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
