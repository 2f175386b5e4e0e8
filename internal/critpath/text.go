package critpath

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// TextGroups are the breakdown's groups the summary shows (breakdown.csv
// has "all" too): the complete journeys' p99 and median, and the journeys
// cut short (lost, or in flight when the logs ended), apart.
var TextGroups = []string{"p99", "median", "cut"}

// WriteText writes the summary's section "Where the latency goes": the
// run's critical path (each category's share of it, largest first, and its
// critical participation), how many slices and how many of them are
// inconsistent, then the breakdown of the p99 and median journeys'
// end-to-end latency into its parts, largest first, and what was read.
func (r *Result) WriteText(w io.Writer) error {
	fmt.Fprintln(w, `Where the latency goes (criticalpath.csv has every slice, breakdown.csv every group; docs/critical-path.md)`)
	if r.Note != "" {
		fmt.Fprintf(w, "  %s\n", r.Note)
	}
	if err := r.writePathText(w); err != nil {
		return err
	}
	if err := r.writeBreakdownText(w); err != nil {
		return err
	}
	if r.AddUp {
		fmt.Fprintln(w, "parts add up exactly: in every group the parts sum to the end-to-end latency, in integer reference cycles")
	} else {
		fmt.Fprintln(w, "parts DO NOT add up: in some group the parts' sum differs from the end-to-end latency (breakdown.csv's total_cycles)")
	}
	fmt.Fprintf(w, "tuples %d, journeys %d (cut short %d), absorbed by lineage %d, visits %d (walked in pass 2: %d), spilled %s\n",
		r.Tuples, r.Journeys, r.Cut, r.Absorbed, r.Visits, r.Walked, txtBytes(r.SpilledBytes))
	if r.Walked < r.Visits {
		fmt.Fprintln(w, "  each in's previous departure was looked up in pass 1: pass 2 walked only the visits where an instance waited")
		if r.IndexFileBytes > 0 {
			fmt.Fprintf(w, "  the departures' indexes did not fit their share of the memory: %s of them read from a file beside the spill\n", txtBytes(r.IndexFileBytes))
		}
	}
	if r.Negative > 0 {
		fmt.Fprintf(w, "  %d hop(s) whose later record has the smaller estimate (negative parts)\n", r.Negative)
	}
	return nil
}

// RunRows are the run-level rows of the critical path, the largest share
// first (then the largest participation, then by kind and name).
func (r *Result) RunRows() []PathRow {
	var rows []PathRow
	for _, x := range r.Path {
		if x.Level == "run" {
			rows = append(rows, x)
		}
	}
	slices.SortStableFunc(rows, func(a, b PathRow) int {
		switch {
		case a.Share != b.Share:
			return cmpDesc(a.Share, b.Share)
		case a.Participation != b.Participation:
			return cmpDesc(a.Participation, b.Participation)
		case a.Kind != b.Kind:
			return strings.Compare(a.Kind, b.Kind)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return rows
}

// FirstInconsistency is the note of the first inconsistent slice ("" when
// every slice is consistent).
func (r *Result) FirstInconsistency() string {
	for _, x := range r.Path {
		if x.Level == "slice" && !x.Consistent {
			return x.Note
		}
	}
	return ""
}

// SliceSeconds is the slices' length (the first slice's; the last one may
// be shorter), 0 without slices.
func (r *Result) SliceSeconds() float64 {
	for _, x := range r.Path {
		if x.Level == "slice" {
			return x.EndS - x.StartS
		}
	}
	return 0
}

// GroupRows are the rows of one breakdown group: its end-to-end row (nil
// when the group has no journeys) and its parts, the largest mean first.
func (r *Result) GroupRows(group string) (*BreakdownRow, []BreakdownRow) {
	var e2e *BreakdownRow
	var parts []BreakdownRow
	for i := range r.Breakdown {
		x := &r.Breakdown[i]
		if x.Group != group {
			continue
		}
		if x.Part == "end-to-end" {
			e2e = x
		} else {
			parts = append(parts, *x)
		}
	}
	slices.SortStableFunc(parts, func(a, b BreakdownRow) int {
		if a.MeanUS != b.MeanUS {
			return cmpDesc(a.MeanUS, b.MeanUS)
		}
		return 0
	})
	return e2e, parts
}

func (r *Result) writePathText(w io.Writer) error {
	rows := r.RunRows()
	if len(rows) == 0 {
		fmt.Fprintln(w, "critical path: none (no slice)")
		return nil
	}
	slicesText := fmt.Sprintf("%d slices", r.Slices)
	if r.Slices == 1 {
		slicesText = "1 slice"
	}
	if s := r.SliceSeconds(); s > 0 {
		slicesText += " of " + strconv.FormatFloat(s, 'g', 4, 64) + " s"
	}
	consistent := "all consistent"
	if r.Inconsistent > 0 {
		consistent = fmt.Sprintf("%d inconsistent, the first: %s", r.Inconsistent, r.FirstInconsistency())
	}
	fmt.Fprintf(w, "critical path of the run (%s from t0; %s): each category's share of the path, largest first, "+
		"and its critical participation (SnailTrail's: its share of every critical path of the slices, one from each activity at a slice's end that was not waiting)\n", slicesText, consistent)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\tname\tshare\tparticipation\t")
	for _, x := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", x.Kind, x.Name, txtPct(x.Share), txtPct(x.Participation))
	}
	return tw.Flush()
}

func (r *Result) writeBreakdownText(w io.Writer) error {
	type group struct {
		name  string
		e2e   *BreakdownRow
		parts []BreakdownRow
	}
	var groups []group
	bounds := false
	for _, g := range TextGroups {
		e2e, parts := r.GroupRows(g)
		if e2e == nil {
			continue
		}
		groups = append(groups, group{g, e2e, parts})
		bounds = bounds || e2e.E2EBoundUS > 0
		for _, x := range parts {
			bounds = bounds || x.BoundUS > 0
		}
	}
	if len(groups) == 0 {
		fmt.Fprintln(w, "latency breakdown: no journeys (no tuple's records were joined)")
		return nil
	}
	head := "group\tjourneys\tpart\twhere\tmean us\tshare\t"
	withBound := func(v float64) string { return "" }
	if bounds {
		fmt.Fprintln(w, "latency breakdown: each journey's end-to-end latency taken apart; per group the means in microseconds, "+
			"the parts largest first, ± the mean strict bound where there is one")
		head += "± us\t"
		withBound = func(v float64) string { return txtBound(v) + "\t" }
	} else {
		fmt.Fprintln(w, "latency breakdown: each journey's end-to-end latency taken apart; per group the means in microseconds, "+
			"the parts largest first (every strict bound is 0)")
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, head)
	for _, g := range groups {
		fmt.Fprintf(tw, "%s\t%d\t%s\t\t%s\t%s\t%s\n", g.name, g.e2e.Tuples, g.e2e.Part, txtUS(g.e2e.E2EMeanUS),
			txtPct(g.e2e.Share), withBound(g.e2e.E2EBoundUS))
		for _, x := range g.parts {
			fmt.Fprintf(tw, "\t\t%s\t%s\t%s\t%s\t%s\n", x.Part, x.Where, txtUS(x.MeanUS), txtPct(x.Share), withBound(x.BoundUS))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// An empty bound leaves blanks at a line's end.
	for _, l := range strings.SplitAfter(buf.String(), "\n") {
		if l == "" {
			continue
		}
		if _, err := io.WriteString(w, strings.TrimRight(l, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// txtPct is a share as a percentage; a share too small for one decimal
// but not zero says so.
func txtPct(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v > 0 && v < 0.0005:
		return "<0.1%"
	case v < 0 && v > -0.0005:
		return ">-0.1%"
	}
	return strconv.FormatFloat(v*100, 'f', 1, 64) + "%"
}

// txtUS is microseconds to the nanosecond, or three significant digits
// below one (as the durations' table).
func txtUS(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v != 0 && math.Abs(v) < 0.001:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func txtBound(v float64) string {
	if !(v > 0) {
		return ""
	}
	return txtUS(v)
}

func txtBytes(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n)
}
