package analyze

import (
	"cloudprofiler/internal/results"
)

// parquetSink writes durations.parquet (package results: typed columns,
// names and kinds as dictionary strings, compressed; no min/max of the
// names, which no reader filters by and whose bounds parquet-go finds by
// comparing every value of every page: 12 % of the writing), its row groups
// encoded on every core (results.CreateLanes): the writer goroutine only
// hands them out.
type parquetSink struct {
	w *results.Writer[DurationRow]
}

func newParquetSink(path string, lanes int) (*parquetSink, error) {
	w, err := results.CreateLanes[DurationRow](path, lanes, results.NoBounds("from_node", "from_channel", "to_node", "to_channel", "kind"))
	if err != nil {
		return nil, err
	}
	return &parquetSink{w: w}, nil
}

func (s *parquetSink) write(rows []DurationRow) error { return s.w.Write(rows) }
func (s *parquetSink) close() error                   { return s.w.Close() }
func (s *parquetSink) abort()                         { s.w.Abort() }
