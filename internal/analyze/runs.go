package analyze

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"

	"cloudprofiler/internal/logfile"
	"cloudprofiler/minrtt"
)

// RunSpan is a FIRSTLAST channel's first and last tuple, and the duration
// between them in reference cycles. The span named "(all)" runs from the
// earliest first to the latest last over every FIRSTLAST channel.
type RunSpan struct {
	Channel             string
	FirstID, LastID     int64
	Duration            minrtt.Duration
	firstNode, lastNode string
	first, last         uint64
	firstEst, lastEst   float64
}

// runSpans reads every FIRSTLAST channel and writes runs.csv.
func (a *analysis) runSpans() error {
	var spans []RunSpan
	var all RunSpan
	all.Channel, all.firstEst, all.lastEst = "(all)", math.Inf(1), math.Inf(-1)
	for _, c := range a.chans {
		if c.Role != RoleFirst {
			continue
		}
		var recs []logfile.Record
		lf, err := logfile.Open(c.Path)
		if err != nil {
			return err
		}
		err = lf.Records(func(r logfile.Record) error { recs = append(recs, r); return nil })
		err = c.ReadDone(lf, err)
		lf.Close()
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			continue
		}
		f, l := recs[0], recs[len(recs)-1]
		d, err := a.model.Duration(c.Node, f.TSC, c.Node, l.TSC)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Path, err)
		}
		fe, err := a.model.PointRel(c.Node, f.TSC)
		if err != nil {
			return err
		}
		le, err := a.model.PointRel(c.Node, l.TSC)
		if err != nil {
			return err
		}
		spans = append(spans, RunSpan{Channel: c.Label(), FirstID: f.TupleID, LastID: l.TupleID, Duration: d})
		if fe.Est < all.firstEst {
			all.firstEst, all.firstNode, all.first, all.FirstID = fe.Est, c.Node, f.TSC, f.TupleID
		}
		if le.Est > all.lastEst {
			all.lastEst, all.lastNode, all.last, all.LastID = le.Est, c.Node, l.TSC, l.TupleID
		}
	}
	if len(spans) > 1 {
		d, err := a.model.Duration(all.firstNode, all.first, all.lastNode, all.last)
		if err != nil {
			return err
		}
		all.Duration = d
		spans = append(spans, all)
	}
	a.res.Runs = spans
	if len(spans) == 0 {
		return nil
	}
	path := filepath.Join(a.cfg.Out, "runs.csv")
	a.res.Files = append(a.res.Files, path)
	hz := a.model.RefHz()
	table := make([]RunRow, 0, len(spans))
	for _, s := range spans {
		table = append(table, RunRow{Channel: s.Channel, FirstTupleID: s.FirstID, LastTupleID: s.LastID, Cycles: s.Duration.Est,
			ErrorCycles: s.Duration.Err, Seconds: s.Duration.Est / hz, ErrorSeconds: s.Duration.Err / hz, Scenario: int32(s.Duration.Scenario)})
	}
	if err := writeTable(a, "runs.parquet", table); err != nil {
		return err
	}
	return writeFile(path, func(w io.Writer) error {
		fmt.Fprintln(w, "channel,first_tuple_id,last_tuple_id,cycles,error_cycles,seconds,error_seconds,scenario")
		for _, s := range spans {
			fmt.Fprintf(w, "%s,%d,%d,%s,%s,%s,%s,%d\n", csvField(s.Channel), s.FirstID, s.LastID,
				ff(s.Duration.Est), ff(s.Duration.Err), ff(s.Duration.Est/hz), ff(s.Duration.Err/hz), s.Duration.Scenario)
		}
		return nil
	})
}

// ThroughputPoint is one period of a counter channel, on the reference time
// line (seconds since the earliest event the analysis saw).
type ThroughputPoint struct {
	T, Period float64 // period end and length, seconds
	Count     uint64
}

// writeThroughput reads every counter channel and writes throughput.csv.
func (a *analysis) writeThroughput() error {
	type series struct {
		c   *Channel
		pts []ThroughputPoint
	}
	var all []series
	hz := a.model.RefHz()
	for _, c := range a.chans {
		if c.Role != RoleCounter {
			continue
		}
		lf, err := logfile.Open(c.Path)
		if err != nil {
			return err
		}
		s := series{c: c}
		prev := math.NaN()
		if c.Header.CounterPeriod > 0 {
			// The first period ends one period after the channel opened (in
			// a cut, after the period before it ended).
			if v, err := a.model.PointRel(c.Node, c.Header.PeriodStart()); err == nil {
				prev = v.Est
			}
		}
		err = lf.Counters(func(r logfile.CounterRecord) error {
			v, err := a.model.PointRel(c.Node, r.TSC)
			if err != nil {
				return err
			}
			period := (v.Est - prev) / hz
			if math.IsNaN(period) || period <= 0 {
				period = float64(c.Header.CounterPeriod) / 1e9
			}
			prev = v.Est
			s.pts = append(s.pts, ThroughputPoint{T: v.Est, Period: period, Count: r.Count})
			return nil
		})
		err = c.ReadDone(lf, err)
		lf.Close()
		if err != nil {
			return err
		}
		for _, p := range s.pts {
			a.t0 = math.Min(a.t0, p.T-p.Period*hz)
		}
		all = append(all, s)
	}
	if len(all) == 0 {
		return nil
	}
	path := filepath.Join(a.cfg.Out, "throughput.csv")
	a.res.Files = append(a.res.Files, path)
	a.throughput = map[int][]ThroughputPoint{}
	var table []ThroughputRow
	err := writeFile(path, func(w io.Writer) error {
		fmt.Fprintln(w, "node,channel,period_end_s,period_s,count,tuples_per_s")
		for _, s := range all {
			idx := a.chanIndex(s.c)
			for i := range s.pts {
				p := &s.pts[i]
				p.T = (p.T - a.t0) / hz
				rate := 0.0
				if p.Period > 0 {
					rate = float64(p.Count) / p.Period
				}
				fmt.Fprintf(w, "%s,%s,%.6f,%.6f,%d,%.1f\n", csvField(s.c.Node), csvField(s.c.Name), p.T, p.Period, p.Count, rate)
				table = append(table, ThroughputRow{Node: s.c.Node, Channel: s.c.Name, PeriodEndS: p.T, PeriodS: p.Period,
					Count: int64(p.Count), TuplesPerS: rate})
			}
			a.throughput[idx] = s.pts
		}
		return nil
	})
	if err != nil {
		return err
	}
	return writeTable(a, "throughput.parquet", table)
}

func (a *analysis) chanIndex(c *Channel) int {
	for i, x := range a.chans {
		if x == c {
			return i
		}
	}
	return -1
}

func csvField(s string) string { return string(appendCSV(nil, s)[1:]) }

// ff formats a number exactly (shortest form that reads back the same), so
// that no printed bound is narrower than the computed one.
func ff(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
