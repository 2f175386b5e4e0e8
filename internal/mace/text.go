package mace

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// WriteText writes the summary's Mace section.
func (res *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Mace: the largest latency predicted from load (mace.csv has every window, mace-costs.csv the costs; docs/mace.md)\n")
	costs := "each instance's cost by the time its backlogged tuples took, in each window where it served 10 or more (else over the run) and each eighth of one where it was backlogged half the time"
	if !res.PerWindow {
		costs = "one cost per instance for the run"
	}
	fmt.Fprintf(&b, "windows of %s s by stimulus (a tuple's first record); cost per tuple (the cost model, as capacity's): own work (in to out) + hand-off, %s; one event at every operator: %s us; the run's smallest latency: %s us\n",
		fmtS(res.WindowS), costs, fmtUS(res.EpsS), fmtUS(res.MinLatS))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tworst Mace s\tpredicted worst s\tmeasured worst s\terror\twithin the bounds\tbusiest node\tload\tlatency bounded up to\t")
	for _, s := range res.Scenarios {
		measured, errs, within := "-", "-", "-"
		if !math.IsNaN(s.WorstMeasuredS) {
			measured = fmt.Sprintf("%.6f", s.WorstMeasuredS)
			errs = fmt.Sprintf("%+.2f%%", 100*(s.WorstLatencyS/s.WorstMeasuredS-1))
		}
		if !s.Excess {
			// No window had excess: the theorem bounds the latency by the
			// window and one event everywhere; a relative error of a
			// bound that is no point estimate says nothing.
			errs = fmt.Sprintf("no excess: latency at most w + e = %s s (+ %s s)", fmtS(res.WindowS+res.EpsS), fmtS(s.BaseS))
		}
		if !math.IsNaN(s.Within) {
			within = fmt.Sprintf("%.1f%% of %d windows", 100*s.Within, s.Windows)
		}
		limit := "-"
		if s.MaxRate > 0 {
			limit = fmt.Sprintf("x%.3g the input rate (%.0f tuples/s)", s.MaxRate, s.MaxSourceRate)
		}
		load := "-"
		if !math.IsNaN(s.Load) {
			load = fmt.Sprintf("%.3f", s.Load)
		}
		fmt.Fprintf(tw, "%s\t%.6f\t%.6f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Name, s.WorstMaceS, s.WorstLatencyS, measured, errs, within,
			orDash(s.Bottleneck), load, limit)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("  predicted worst: the largest over the windows of the time a node takes, from a 32nd of the window, to do its excess before it and that 32nd's work, plus the run's smallest latency; " +
		"within the bounds: Mace <= the window's largest latency <= Mace + window + one event at every operator + the run's smallest latency; load: a node's work over the span of the source's records (above 1 it cannot keep up)\n")
	for _, c := range res.Costs {
		if !math.IsNaN(c.CostS) {
			ho := "hand-off not measured (never backlogged)"
			if !math.IsNaN(c.HandOffS) {
				ho = "hand-off " + fmtUS(c.HandOffS) + " us"
			}
			span := ""
			if !math.IsNaN(c.MinS) {
				span = fmt.Sprintf("; %s to %s us in its windows", fmtUS(c.MinS), fmtUS(c.MaxS))
			}
			fmt.Fprintf(&b, "  cost %s (%s): %s us a tuple (own work %s us, %s, over %d tuples, %s%s)\n", c.Operator, c.Instance, fmtUS(c.CostS),
				fmtUS(c.ServiceS), ho, c.Tuples, c.From, span)
		}
	}
	if len(res.Flags) == 0 {
		b.WriteString("assumptions: none broken that the logs show (no streams merging, no CPU shared, costs steady, stimulus order kept, enough tuples in busy windows)\n")
	} else {
		b.WriteString("assumptions broken (the bounds may not hold):\n")
		for _, f := range res.Flags {
			fmt.Fprintf(&b, "  %s\n", f)
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func fmtUS(s float64) string {
	if math.IsNaN(s) {
		return "-"
	}
	return fmt.Sprintf("%.3f", s*1e6)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
