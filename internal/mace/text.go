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
	fmt.Fprintf(&b, "Mace: the largest latency predicted from load (mace.csv has every window, mace-costs.csv the costs; README, \"Mace\")\n")
	fmt.Fprintf(&b, "windows of %s s by stimulus (a tuple's first record); cost per tuple: each instance's mean own service time (in to out) plus its overhead while backlogged (previous departure to next in); one event at every operator: %s us\n",
		fmtS(res.WindowS), fmtUS(res.EpsS))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tworst Mace s\tpredicted worst s\tmeasured worst s\terror\twithin the bounds\tbusiest node\tload\tlatency bounded up to\t")
	for _, s := range res.Scenarios {
		measured, errs, within := "-", "-", "-"
		if !math.IsNaN(s.WorstMeasuredS) {
			measured = fmt.Sprintf("%.6f", s.WorstMeasuredS)
			errs = fmt.Sprintf("%+.2f%%", 100*(s.WorstLatencyS/s.WorstMeasuredS-1))
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
	fmt.Fprintf(&b, "  predicted worst: the largest over the windows of a node's excess before a 32nd of the window plus that 32nd's load, plus the run's smallest latency; within the bounds: Mace <= the window's largest latency <= 1.01 Mace + window + one event at every operator + the largest latency of the windows without excess (%s us: transfers, wake-ups)\n", fmtUS(res.FreeS))
	for _, c := range res.Costs {
		if !math.IsNaN(c.CostS) {
			ov := "no overhead measured"
			if !math.IsNaN(c.OverheadS) {
				ov = "overhead while backlogged " + fmtUS(c.OverheadS) + " us"
			}
			fmt.Fprintf(&b, "  cost %s (%s): %s us a tuple (own service %s us over %d tuples, %s; %s)\n", c.Operator, c.Instance, fmtUS(c.CostS),
				fmtUS(c.ServiceS), c.Tuples, c.From, ov)
		}
	}
	if len(res.Flags) == 0 {
		b.WriteString("assumptions: none broken that the logs show (no streams merging, no CPU shared, stimulus order kept, enough tuples in busy windows)\n")
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

func fmtUS(s float64) string { return fmt.Sprintf("%.3f", s*1e6) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
