package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// summary.txt: the verdict, the run, a table of every pair, and the
// analyses' own texts.

// WriteText writes the summary as a table for people, in microseconds.
func WriteText(w io.Writer, r *Input) error {
	fmt.Fprintf(w, "reference node %s (%.6f GHz); %d channels, %d tuple records, %d tuples, %d durations\n",
		r.Ref, r.RefHz/1e9, len(r.Channels), r.Records, r.Tuples, r.Durations)
	rows := r.Rows()
	var vb strings.Builder
	writeVerdictText(&vb, Verdict(r))
	io.WriteString(w, vb.String())
	fmt.Fprintf(w, "channel order: %s\n", strings.Join(r.Order, " -> "))
	if r.SkippedTuples > 0 {
		fmt.Fprintf(w, "left out: %d tuple ids with more than %d records each (%d records): ids reused?\n",
			r.SkippedTuples, r.MaxTupleRecords, r.SkippedRecords)
	}
	for _, s := range r.SkippedFiles {
		fmt.Fprintf(w, "not read: %s\n", s)
	}
	if r.LineageChannels > 0 {
		fmt.Fprintf(w, "lineage: %d channels, %d records: %d output ids joined to the last input logged for each\n",
			r.LineageChannels, r.LineagePairs, r.LineageOutputs)
	}
	fmt.Fprintln(w, "bounds are strict in reference cycles; seconds divide by the reference node's registered TSC frequency")
	fmt.Fprintln(w, "durations in microseconds; ± is the strict bound (median, max); paper and baseline: their bounds' medians")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\tfrom\tto\tcount\tmin\tp25\tmedian\tp75\tp99\tmax\t±median\t±max\tpaper\tbaseline\t")
	us := func(v float64) string { return num(v * 1e6) }
	for _, x := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", x.Kind, x.From, x.To, x.Count,
			us(x.Min), us(x.P25), us(x.Median), us(x.P75), us(x.P99), us(x.Max), us(x.ErrMedian), us(x.ErrMax),
			us(x.PaperMedian), us(x.BaselineMedian))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, x := range rows {
		if x.Kind == KindReturnRTT {
			fmt.Fprintf(w, "return-trip method %s -> %s: overestimates by %s us (median), %s us (max); our bound on the same durations ±%s us (median)\n",
				x.From, x.To, us(x.RetErrMedian), us(x.RetErrMax), us(x.OursErrMedian))
		}
	}
	for _, s := range r.Runs {
		fmt.Fprintf(w, "run %s: %.6f s ± %.3f us (tuples %d .. %d)\n", s.Channel, s.Seconds, s.Bound*1e6, s.FirstID, s.LastID)
	}
	writeIntegrity(w, r)
	switch {
	case r.Capacity != nil:
		if err := r.Capacity.WriteText(w); err != nil {
			return err
		}
	case r.CapacityNote != "":
		fmt.Fprintln(w, r.CapacityNote)
	}
	switch {
	case r.CritPath != nil:
		if err := r.CritPath.WriteText(w); err != nil {
			return err
		}
	case r.CritPathNote != "":
		fmt.Fprintln(w, r.CritPathNote)
	}
	switch {
	case r.Mace != nil:
		return r.Mace.WriteText(w)
	case r.MaceNote != "":
		fmt.Fprintln(w, r.MaceNote)
	}
	return nil
}

// writeIntegrity says, per channel, whether its file held every record the
// channel accepted, undamaged; the analysis above used every valid record.
func writeIntegrity(w io.Writer, r *Input) {
	bad := r.Incomplete()
	if len(bad) == 0 {
		fmt.Fprintf(w, "logs: all %d files complete and undamaged\n", len(r.Channels))
		return
	}
	fmt.Fprintf(w, "logs: %d of %d files DAMAGED OR INCOMPLETE (the results above use every valid record in them):\n", len(bad), len(r.Channels))
	for _, c := range bad {
		fmt.Fprintf(w, "  %s (%s):\n", c.Label, c.Path)
		for _, p := range c.Problems {
			fmt.Fprintf(w, "    %s\n", p)
		}
	}
}
