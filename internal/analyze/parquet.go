package analyze

import (
	"cloudprofiler/internal/results"
)

// parquetSink writes durations.parquet (package results: typed columns,
// names and kinds as dictionary strings, compressed).
type parquetSink struct {
	w *results.Writer[DurationRow]
}

func newParquetSink(path string) (*parquetSink, error) {
	w, err := results.Create[DurationRow](path)
	if err != nil {
		return nil, err
	}
	return &parquetSink{w: w}, nil
}

func (s *parquetSink) write(rows []DurationRow) error { return s.w.Write(rows) }
func (s *parquetSink) close() error                   { return s.w.Close() }
func (s *parquetSink) abort()                         { s.w.Abort() }
