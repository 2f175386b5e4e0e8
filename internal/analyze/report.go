package analyze

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"cloudprofiler/internal/report"
	"cloudprofiler/minrtt"
)

// Row is one line of the summary: a pair's durations in seconds. The
// report (internal/report) shows it; the pipeline computes it and writes
// it to summary.csv and summary.parquet.
type Row = report.Row

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
	in := r.reportInput(rows) // what summary.txt and report.html show
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
	if err := out("summary.txt", func(w io.Writer) error { return report.WriteText(w, in) }); err != nil {
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
	return out("report.html", func(w io.Writer) error { return report.WriteHTML(w, a.addPage(in)) })
}
