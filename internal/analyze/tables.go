package analyze

import (
	"path/filepath"

	"cloudprofiler/internal/results"
)

// The small result tables as Parquet, beside their CSVs: the same columns,
// typed (package results), for pandas, pyarrow and DuckDB.

// SummaryRow is one row of summary.parquet: a pair's durations in seconds.
type SummaryRow struct {
	Kind                 string  `parquet:"kind,dict"`
	From                 string  `parquet:"from,dict"`
	To                   string  `parquet:"to,dict"`
	Count                int64   `parquet:"count"`
	MinS                 float64 `parquet:"min_s"`
	P25S                 float64 `parquet:"p25_s"`
	MedianS              float64 `parquet:"median_s"`
	P75S                 float64 `parquet:"p75_s"`
	P99S                 float64 `parquet:"p99_s"`
	MaxS                 float64 `parquet:"max_s"`
	ErrorMinS            float64 `parquet:"error_min_s"`
	ErrorMedianS         float64 `parquet:"error_median_s"`
	ErrorMaxS            float64 `parquet:"error_max_s"`
	PaperErrorMedianS    float64 `parquet:"paper_error_median_s"`
	BaselineErrorMedianS float64 `parquet:"baseline_error_median_s"`
	RetMinusOursMedianS  float64 `parquet:"ret_minus_ours_median_s"`
	RetMinusOursMaxS     float64 `parquet:"ret_minus_ours_max_s"`
	Scenario0            int64   `parquet:"scenario_0"`
	Scenario1            int64   `parquet:"scenario_1"`
	Scenario2            int64   `parquet:"scenario_2"`
	Scenario3            int64   `parquet:"scenario_3"`
	Quantiles            string  `parquet:"quantiles,dict"`
}

// RunRow is one row of runs.parquet.
type RunRow struct {
	Channel      string  `parquet:"channel,dict"`
	FirstTupleID int64   `parquet:"first_tuple_id"`
	LastTupleID  int64   `parquet:"last_tuple_id"`
	Cycles       float64 `parquet:"cycles"`
	ErrorCycles  float64 `parquet:"error_cycles"`
	Seconds      float64 `parquet:"seconds"`
	ErrorSeconds float64 `parquet:"error_seconds"`
	Scenario     int32   `parquet:"scenario"`
}

// ThroughputRow is one row of throughput.parquet.
type ThroughputRow struct {
	Node       string  `parquet:"node,dict"`
	Channel    string  `parquet:"channel,dict"`
	PeriodEndS float64 `parquet:"period_end_s"`
	PeriodS    float64 `parquet:"period_s"`
	Count      int64   `parquet:"count"`
	TuplesPerS float64 `parquet:"tuples_per_s"`
}

// writeTable writes rows as Out/name (name ends in .parquet) and lists it.
func writeTable[T any](a *analysis, name string, rows []T) error {
	path := filepath.Join(a.cfg.Out, name)
	w, err := results.Create[T](path)
	if err != nil {
		return err
	}
	if err := w.Write(rows); err != nil {
		w.Abort()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	a.res.Files = append(a.res.Files, path)
	return nil
}
