package analyze

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"cloudprofiler/minrtt"
)

// Row is one line of the summary: a pair's durations in seconds.
type Row struct {
	Kind, From, To                  string
	Count                           uint64
	Min, P25, Median, P75, P99, Max float64 // duration, seconds
	ErrMin, ErrMedian, ErrMax       float64 // bound, seconds
	PaperMedian, BaselineMedian     float64 // the paper's and the baseline's bounds, seconds
	RetErrMedian, RetErrMax         float64 // return_trip: ReT minus ours, seconds
	OursErrMedian                   float64 // return_trip: our bound on the start-to-end duration, seconds
	Scenarios                       [4]uint64
	Exact                           bool
}

// Rows summarises every pair, in report order.
func (r *Result) Rows() []Row {
	var rows []Row
	for _, p := range r.Pairs {
		q := p.Dur.Quantiles(0.25, 0.5, 0.75, 0.99)
		e := p.Err.Quantiles(0.5)
		row := Row{Kind: p.Key.Kind, From: r.Channels[p.Key.From].Label(), To: r.Channels[p.Key.To].Label(),
			Count: p.Dur.N, Min: p.Dur.Min / r.RefHz, P25: q[0] / r.RefHz, Median: q[1] / r.RefHz, P75: q[2] / r.RefHz,
			P99: q[3] / r.RefHz, Max: p.Dur.Max / r.RefHz, ErrMin: p.Err.Min / r.RefHz, ErrMedian: e[0] / r.RefHz,
			ErrMax: p.Err.Max / r.RefHz, PaperMedian: p.Paper.Quantiles(0.5)[0] / r.RefHz,
			BaselineMedian: p.Baseline.Quantiles(0.5)[0] / r.RefHz, Scenarios: p.Scenarios, Exact: p.Dur.Exact()}
		if p.RetErr != nil {
			row.RetErrMedian, row.RetErrMax = p.RetErr.Quantiles(0.5)[0]/r.RefHz, p.RetErr.Max/r.RefHz
			row.OursErrMedian = p.OursErr.Quantiles(0.5)[0] / r.RefHz
		}
		rows = append(rows, row)
	}
	return rows
}

func (a *analysis) writeSummaries() error {
	r := a.res
	rows := r.Rows()
	out := func(name string, fn func(io.Writer) error) error {
		path := filepath.Join(a.cfg.Out, name)
		r.Files = append(r.Files, path)
		return writeFile(path, fn)
	}
	err := out("summary.csv", func(w io.Writer) error {
		fmt.Fprintln(w, "kind,from,to,count,min_s,p25_s,median_s,p75_s,p99_s,max_s,error_min_s,error_median_s,error_max_s,"+
			"paper_error_median_s,baseline_error_median_s,ret_minus_ours_median_s,ret_minus_ours_max_s,scenario_counts,quantiles")
		for _, x := range rows {
			q := "exact"
			if !x.Exact {
				q = "histogram-0.1%"
			}
			fmt.Fprintf(w, "%s,%s,%s,%d", x.Kind, csvField(x.From), csvField(x.To), x.Count)
			for _, v := range []float64{x.Min, x.P25, x.Median, x.P75, x.P99, x.Max, x.ErrMin, x.ErrMedian, x.ErrMax,
				x.PaperMedian, x.BaselineMedian, x.RetErrMedian, x.RetErrMax} {
				fmt.Fprintf(w, ",%s", ff(v))
			}
			fmt.Fprintf(w, ",%d/%d/%d/%d,%s\n", x.Scenarios[0], x.Scenarios[1], x.Scenarios[2], x.Scenarios[3], q)
		}
		return nil
	})
	if err != nil {
		return err
	}
	table := make([]SummaryRow, 0, len(rows))
	for _, x := range rows {
		q := "exact"
		if !x.Exact {
			q = "histogram-0.1%"
		}
		table = append(table, SummaryRow{Kind: x.Kind, From: x.From, To: x.To, Count: int64(x.Count), MinS: x.Min, P25S: x.P25,
			MedianS: x.Median, P75S: x.P75, P99S: x.P99, MaxS: x.Max, ErrorMinS: x.ErrMin, ErrorMedianS: x.ErrMedian,
			ErrorMaxS: x.ErrMax, PaperErrorMedianS: x.PaperMedian, BaselineErrorMedianS: x.BaselineMedian,
			RetMinusOursMedianS: x.RetErrMedian, RetMinusOursMaxS: x.RetErrMax, Scenario0: int64(x.Scenarios[0]),
			Scenario1: int64(x.Scenarios[1]), Scenario2: int64(x.Scenarios[2]), Scenario3: int64(x.Scenarios[3]), Quantiles: q})
	}
	if err := writeTable(a, "summary.parquet", table); err != nil {
		return err
	}
	if err := out("summary.txt", func(w io.Writer) error { return r.WriteText(w) }); err != nil {
		return err
	}
	if err := out("model.json", func(w io.Writer) error {
		m := struct {
			Ref   string        `json:"ref"`
			RefHz float64       `json:"ref_hz"`
			Nodes []string      `json:"nodes"`
			Links []minrtt.Link `json:"links"`
		}{a.model.Ref(), a.model.RefHz(), a.model.Nodes(), a.model.Links()}
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(m)
	}); err != nil {
		return err
	}
	if a.cfg.NoReport {
		return nil
	}
	return out("report.html", func(w io.Writer) error { return a.writeHTML(w, rows) })
}

// WriteText writes the summary as a table for people, in microseconds.
func (r *Result) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "reference node %s (%.6f GHz); %d channels, %d tuple records, %d tuples, %d durations\n",
		r.Ref, r.RefHz/1e9, len(r.Channels), r.Records, r.Tuples, r.Durations)
	rows := r.Rows()
	var vb strings.Builder
	writeVerdictText(&vb, r.Verdict(rows))
	io.WriteString(w, vb.String())
	fmt.Fprintf(w, "channel order: %s\n", strings.Join(r.Order, " -> "))
	if r.SkippedTuples > 0 {
		fmt.Fprintf(w, "left out: %d tuple ids with more than %d records each (%d records): ids reused?\n",
			r.SkippedTuples, maxTupleEvents, r.SkippedRecords)
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
		fmt.Fprintf(w, "run %s: %.6f s ± %.3f us (tuples %d .. %d)\n", s.Channel, s.Duration.Est/r.RefHz,
			s.Duration.Err/r.RefHz*1e6, s.FirstID, s.LastID)
	}
	r.writeIntegrity(w)
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
func (r *Result) writeIntegrity(w io.Writer) {
	bad := r.Incomplete()
	if len(bad) == 0 {
		fmt.Fprintf(w, "logs: all %d files complete and undamaged\n", len(r.Channels))
		return
	}
	fmt.Fprintf(w, "logs: %d of %d files DAMAGED OR INCOMPLETE (the results above use every valid record in them):\n", len(bad), len(r.Channels))
	for _, c := range bad {
		fmt.Fprintf(w, "  %s (%s):\n", c.Label(), c.Path)
		for _, p := range c.Problems {
			fmt.Fprintf(w, "    %s\n", p)
		}
	}
}
