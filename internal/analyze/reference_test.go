package analyze

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"cloudprofiler/internal/logfile"
	"cloudprofiler/minrtt"
)

// The analysis as it was before the pipeline (pipeline.go) replaced it:
// one decoder, a sort-based join spilling to 64 partition files, two full
// passes (the votes, then the durations). Tests compare the pipeline's
// results with it, number for number and row for row.

type refJoiner struct {
	dir     string
	budget  int
	mem     []event
	parts   []*os.File
	writers []*bufio.Writer
	buf     [20]byte
}

func refPartition(id int64) int { return int((uint64(id) * 0x9E3779B97F4A7C15) >> (64 - 6)) }

func (j *refJoiner) add(e event) error {
	if j.parts == nil {
		j.mem = append(j.mem, e)
		if len(j.mem) < j.budget {
			return nil
		}
		if err := os.MkdirAll(j.dir, 0o755); err != nil {
			return err
		}
		for i := 0; i < 64; i++ {
			f, err := os.Create(filepath.Join(j.dir, fmt.Sprintf("part-%02d", i)))
			if err != nil {
				return err
			}
			j.parts = append(j.parts, f)
			j.writers = append(j.writers, bufio.NewWriterSize(f, 64<<10))
		}
		for _, m := range j.mem {
			if err := j.spill(m); err != nil {
				return err
			}
		}
		j.mem = nil
		return nil
	}
	return j.spill(e)
}

func (j *refJoiner) spill(e event) error {
	binary.LittleEndian.PutUint64(j.buf[0:], uint64(e.id))
	binary.LittleEndian.PutUint64(j.buf[8:], e.tsc)
	binary.LittleEndian.PutUint32(j.buf[16:], e.ch)
	_, err := j.writers[refPartition(e.id)].Write(j.buf[:])
	return err
}

func (j *refJoiner) each(fill func([]event), fn func([]event) error) error {
	sortEv := func(evs []event) {
		fill(evs)
		slices.SortFunc(evs, func(a, b event) int {
			if a.id != b.id {
				if a.id < b.id {
					return -1
				}
				return 1
			}
			switch {
			case a.est < b.est:
				return -1
			case a.est > b.est:
				return 1
			}
			return int(a.ch) - int(b.ch)
		})
	}
	if j.parts == nil {
		sortEv(j.mem)
		return fn(j.mem)
	}
	var evs []event
	for i, f := range j.parts {
		if err := j.writers[i].Flush(); err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		evs = evs[:0]
		r := bufio.NewReaderSize(f, 256<<10)
		var b [20]byte
		for {
			if _, err := io.ReadFull(r, b[:]); err == io.EOF {
				break
			} else if err != nil {
				return err
			}
			evs = append(evs, event{id: int64(binary.LittleEndian.Uint64(b[0:])),
				tsc: binary.LittleEndian.Uint64(b[8:]), ch: binary.LittleEndian.Uint32(b[16:])})
		}
		sortEv(evs)
		if err := fn(evs); err != nil {
			return err
		}
	}
	return nil
}

func (j *refJoiner) close() {
	for _, f := range j.parts {
		f.Close()
		os.Remove(f.Name())
	}
	os.Remove(j.dir)
}

// refJoinTuples is the old joinTuples: it fills a.res, a.pairs, a.rank and
// a.t0 as the pipeline does, and returns the durations as CSV rows.
func refJoinTuples(a *analysis, memEvents int) ([]string, error) {
	j := &refJoiner{dir: filepath.Join(a.cfg.Out, ".refspill"), budget: max(memEvents, 1024)}
	defer j.close()
	for i, c := range a.chans {
		if c.Role != RoleTuples && c.Role != RoleReturn {
			continue
		}
		lf, err := logfile.Open(c.Path)
		if err != nil {
			return nil, err
		}
		err = lf.Records(func(r logfile.Record) error {
			a.res.Records++
			return j.add(event{id: r.TupleID, tsc: r.TSC, ch: uint32(i)})
		})
		err = c.ReadDone(lf, err)
		lf.Close()
		if err != nil {
			return nil, err
		}
	}
	fill := func(evs []event) {
		for k := range evs {
			e := &evs[k]
			v := a.model.PointRelIdx(a.chans[e.ch].node, e.tsc)
			e.est, e.err = v.Est, v.Err
			a.t0 = math.Min(a.t0, v.Est)
		}
	}
	ov := orderVotes{}
	err := j.each(fill, func(evs []event) error {
		for s := 0; s < len(evs); {
			e := s + 1
			for e < len(evs) && evs[e].id == evs[s].id {
				e++
			}
			a.vote(ov, evs[s:e])
			s = e
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if a.rank, err = a.rankChannels(ov); err != nil {
		return nil, err
	}
	byRank := make([]int, len(a.chans))
	for i, r := range a.rank {
		byRank[r] = i
	}
	for _, i := range byRank {
		if a.chans[i].Role == RoleTuples {
			a.res.Order = append(a.res.Order, a.chans[i].Label())
		}
	}
	var rows []string
	err = j.each(fill, func(evs []event) error {
		for s := 0; s < len(evs); {
			e := s + 1
			for e < len(evs) && evs[e].id == evs[s].id {
				e++
			}
			a.res.Tuples++
			refTuple(a, evs[s:e], &rows)
			s = e
		}
		return nil
	})
	return rows, err
}

func refTuple(a *analysis, evs []event, rows *[]string) {
	if len(evs) > maxTupleEvents {
		a.res.SkippedTuples++
		a.res.SkippedRecords += uint64(len(evs))
		return
	}
	var hops, rets []event
	for _, e := range evs {
		if a.chans[e.ch].Role == RoleReturn {
			rets = append(rets, e)
		} else {
			hops = append(hops, e)
		}
	}
	slices.SortStableFunc(hops, func(x, y event) int { return a.rank[x.ch] - a.rank[y.ch] })
	for i := 1; i < len(hops); i++ {
		x, y := hops[i-1], hops[i]
		kind := KindTransfer
		if cx, cy := a.chans[x.ch], a.chans[y.ch]; cx.Node == cy.Node && cx.PID == cy.PID {
			kind = KindCompute
		}
		refDuration(a, kind, x, y, nil, -1, rows)
	}
	if len(hops) >= 3 {
		refDuration(a, KindEndToEnd, hops[0], hops[len(hops)-1], nil, -1, rows)
	}
	for _, r := range rets {
		start, ok := a.retOf[int(r.ch)]
		if !ok {
			continue
		}
		var s *event
		for k := range hops {
			if int(hops[k].ch) == start && s == nil {
				s = &hops[k]
			}
		}
		if s == nil || len(hops) < 2 {
			continue
		}
		end := &hops[len(hops)-1]
		ours := a.model.DurationIdx(a.chans[s.ch].node, s.tsc, a.chans[end.ch].node, end.tsc)
		refDuration(a, KindReturnRTT, *s, r, &ours, int(end.ch), rows)
	}
}

func refDuration(a *analysis, kind string, x, y event, ours *minrtt.Duration, keyTo int, rows *[]string) {
	cx, cy := a.chans[x.ch], a.chans[y.ch]
	d := a.model.DurationIdx(cx.node, x.tsc, cy.node, y.tsc)
	key := PairKey{kind, int(x.ch), int(y.ch)}
	if keyTo >= 0 {
		key.To = keyTo
	}
	p := a.pairs[key]
	if p == nil {
		p = newPairStats(key, ours != nil)
		a.pairs[key] = p
	}
	p.Dur.Add(d.Est)
	p.Err.Add(d.Err)
	p.Paper.Add(d.Paper)
	p.Baseline.Add(d.Baseline)
	if d.Scenario >= 0 && d.Scenario < 4 {
		p.Scenarios[d.Scenario]++
	}
	if ours != nil {
		p.RetErr.Add(d.Est - ours.Est)
		p.OursErr.Add(ours.Err)
	}
	a.res.Durations++
	hz := a.model.RefHz()
	b := strconv.AppendInt(nil, x.id, 10)
	b = appendCSV(b, cx.Node)
	b = appendCSV(b, cx.Name)
	b = appendCSV(b, cy.Node)
	b = appendCSV(b, cy.Name)
	b = append(b, ',')
	b = append(b, kind...)
	b = append(b, ',')
	b = strconv.AppendUint(b, x.tsc, 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, y.tsc, 10)
	for _, v := range []float64{d.Est, d.Err, d.Est / hz, d.Err / hz} {
		b = append(b, ',')
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(d.Scenario), 10)
	for _, v := range []float64{d.Paper, d.Baseline} {
		b = append(b, ',')
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	*rows = append(*rows, string(b))
}
