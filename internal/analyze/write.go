package analyze

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"cloudprofiler/minrtt"
)

// Stage 6 of the pipeline (pipeline.go): writing the durations. Workers
// fill batches of rows; one writer goroutine takes them partition by
// partition, in partition order, so the file's rows come in the same order
// however the partitions were shared out (by partition, then tuple id, then
// the tuple's hops). A worker that runs ahead waits once it has a few
// batches queued: memory stays bounded.

// DurationRow is one row of durations.parquet (and durations.csv).
type DurationRow struct {
	TupleID             int64   `parquet:"tuple_id,delta"`
	FromNode            string  `parquet:"from_node,dict"`
	FromChannel         string  `parquet:"from_channel,dict"`
	ToNode              string  `parquet:"to_node,dict"`
	ToChannel           string  `parquet:"to_channel,dict"`
	Kind                string  `parquet:"kind,dict"`
	StartTSC            uint64  `parquet:"start_tsc,delta"`
	EndTSC              uint64  `parquet:"end_tsc,delta"`
	Cycles              float64 `parquet:"cycles"`
	ErrorCycles         float64 `parquet:"error_cycles"`
	Seconds             float64 `parquet:"seconds"`
	ErrorSeconds        float64 `parquet:"error_seconds"`
	Scenario            int32   `parquet:"scenario"`
	PaperErrorCycles    float64 `parquet:"paper_error_cycles"`
	BaselineErrorCycles float64 `parquet:"baseline_error_cycles"`
}

const rowBatchSize = 4096

// rowBatcher is a worker's batch of rows for the partition it works on.
type rowBatcher struct {
	dw    *durationWriter
	hz    float64
	chans []*Channel
	cur   []DurationRow
	slot  chan []DurationRow
}

func (b *rowBatcher) add(kind string, x, y *event, d *minrtt.Duration) error {
	return b.addRecord(kind, x.id, x.ch, y.ch, x.tsc, y.tsc, d)
}

// addRecord adds the row of tuple id's duration d from channel chx's
// reading tscx to chy's tscy.
func (b *rowBatcher) addRecord(kind string, id int64, chx, chy uint32, tscx, tscy uint64, d *minrtt.Duration) error {
	cx, cy := b.chans[chx], b.chans[chy]
	b.cur = append(b.cur, DurationRow{TupleID: id, FromNode: cx.Node, FromChannel: cx.Name, ToNode: cy.Node,
		ToChannel: cy.Name, Kind: kind, StartTSC: tscx, EndTSC: tscy, Cycles: d.Est, ErrorCycles: d.Err,
		Seconds: d.Est / b.hz, ErrorSeconds: d.Err / b.hz, Scenario: int32(d.Scenario),
		PaperErrorCycles: d.Paper, BaselineErrorCycles: d.Baseline})
	if len(b.cur) == rowBatchSize {
		return b.send()
	}
	return nil
}

func (b *rowBatcher) send() error {
	if len(b.cur) == 0 {
		return nil
	}
	select {
	case b.slot <- b.cur:
	case <-b.dw.failed:
		return b.dw.err
	}
	select {
	case b.cur = <-b.dw.free:
		b.cur = b.cur[:0]
	default:
		b.cur = make([]DurationRow, 0, rowBatchSize)
	}
	return nil
}

// begin starts partition k's rows; end sends the last batch and closes it.
func (b *rowBatcher) begin(k int) { b.slot = b.dw.slots[k] }

func (b *rowBatcher) end() error {
	err := b.send()
	close(b.slot)
	return err
}

// rowSink is one output format of the durations.
type rowSink interface {
	write(rows []DurationRow) error
	close() error // finishes the file
	abort()       // removes what was written
}

// durationWriter takes every partition's rows in partition order to the
// sinks.
type durationWriter struct {
	slots  []chan []DurationRow
	free   chan []DurationRow
	sinks  []rowSink
	done   chan struct{}
	failed chan struct{} // closed when a sink failed: workers stop waiting
	err    error
}

func newDurationWriter(parts int, sinks []rowSink) *durationWriter {
	dw := &durationWriter{slots: make([]chan []DurationRow, parts), free: make(chan []DurationRow, 8),
		sinks: sinks, done: make(chan struct{}), failed: make(chan struct{})}
	for k := range dw.slots {
		dw.slots[k] = make(chan []DurationRow, 2)
	}
	go dw.run()
	return dw
}

func (dw *durationWriter) batcher(a *analysis) *rowBatcher {
	return &rowBatcher{dw: dw, hz: a.model.RefHz(), chans: a.chans, cur: make([]DurationRow, 0, rowBatchSize)}
}

func (dw *durationWriter) run() {
	defer close(dw.done)
	for _, slot := range dw.slots {
		for rows := range slot {
			if dw.err == nil {
				for _, s := range dw.sinks {
					if err := s.write(rows); err != nil {
						dw.err = err
						close(dw.failed)
						break
					}
				}
			}
			select {
			case dw.free <- rows:
			default:
			}
		}
	}
}

// finish waits for every partition's rows (each must have been ended, or
// abandon called) and closes the files; on any error they are removed.
func (dw *durationWriter) finish() error {
	<-dw.done
	err := dw.err
	for _, s := range dw.sinks {
		if err == nil {
			err = s.close()
		}
	}
	if err != nil {
		for _, s := range dw.sinks {
			s.abort()
		}
	}
	return err
}

// abandon ends every partition no worker ended (after a failure) and
// removes the files.
func (dw *durationWriter) abandon(ended func(k int) bool) {
	for k, slot := range dw.slots {
		if !ended(k) {
			close(slot)
		}
	}
	<-dw.done
	for _, s := range dw.sinks {
		s.abort()
	}
}

// csvSink writes durations.csv.
type csvSink struct {
	path, tmp string
	f         *os.File
	w         *bufio.Writer
	row       []byte
}

const durationsCSVHeader = "tuple_id,from_node,from_channel,to_node,to_channel,kind,start_tsc,end_tsc," +
	"cycles,error_cycles,seconds,error_seconds,scenario,paper_error_cycles,baseline_error_cycles\n"

func newCSVSink(path string) (*csvSink, error) {
	s := &csvSink{path: path, tmp: path + ".partial"}
	f, err := os.Create(s.tmp)
	if err != nil {
		return nil, err
	}
	s.f, s.w = f, bufio.NewWriterSize(f, 1<<20)
	s.w.WriteString(durationsCSVHeader)
	return s, nil
}

func (s *csvSink) write(rows []DurationRow) error {
	for i := range rows {
		s.row = appendDurationCSV(s.row[:0], &rows[i])
		if _, err := s.w.Write(s.row); err != nil {
			return errors.New(filepath.Base(s.path) + ": " + err.Error())
		}
	}
	return nil
}

// appendDurationCSV appends one durations.csv line.
func appendDurationCSV(b []byte, r *DurationRow) []byte {
	b = strconv.AppendInt(b, r.TupleID, 10)
	b = appendCSV(b, r.FromNode)
	b = appendCSV(b, r.FromChannel)
	b = appendCSV(b, r.ToNode)
	b = appendCSV(b, r.ToChannel)
	b = append(b, ',')
	b = append(b, r.Kind...)
	b = append(b, ',')
	b = strconv.AppendUint(b, r.StartTSC, 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, r.EndTSC, 10)
	// Shortest exact form ('g', -1): a rounded bound could exclude the truth.
	for _, v := range []float64{r.Cycles, r.ErrorCycles, r.Seconds, r.ErrorSeconds} {
		b = append(b, ',')
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(r.Scenario), 10)
	for _, v := range []float64{r.PaperErrorCycles, r.BaselineErrorCycles} {
		b = append(b, ',')
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	return append(b, '\n')
}

func (s *csvSink) close() error {
	err := s.w.Flush()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(s.tmp, s.path)
	}
	if err != nil {
		os.Remove(s.tmp)
		return errors.New(filepath.Base(s.path) + ": " + err.Error())
	}
	return nil
}

func (s *csvSink) abort() {
	s.f.Close()
	os.Remove(s.tmp)
}

// appendCSV appends ",field", quoted when it needs to be.
func appendCSV(b []byte, s string) []byte {
	b = append(b, ',')
	if !strings.ContainsAny(s, ",\"\n\r") {
		return append(b, s...)
	}
	b = append(b, '"')
	b = append(b, strings.ReplaceAll(s, `"`, `""`)...)
	return append(b, '"')
}
