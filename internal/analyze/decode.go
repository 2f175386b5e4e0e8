package analyze

import (
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"cloudprofiler/internal/critpath"
	"cloudprofiler/internal/logfile"
)

// Stage 1 of the pipeline (pipeline.go): decoding. The tuple and return
// channels' files are shared out to the workers, largest first; a worker
// decodes a file's frames (logfile.RecordBatches: checksums verified,
// damage skipped and counted on the channel; frames loaded ahead on the
// cores no other file takes) and hands each record to the partitioning
// (partition.go).

// decodeAll decodes every tuple channel into ps with the given workers,
// after the lineage channels (lineage.go): each record of an output id
// goes in with the id of the input it is joined to.
func (a *analysis) decodeAll(ps *partitions, workers int) error {
	var alias lineageMap
	if ps != nil { // DecodeFloor: the records as they are
		var err error
		if alias, err = a.readLineage(); err != nil {
			return err
		}
	}
	var todo []int
	size := map[int]int64{}
	for i, c := range a.chans {
		if c.Role == RoleTuples || c.Role == RoleReturn {
			todo = append(todo, i)
			if st, err := os.Stat(c.Path); err == nil {
				size[i] = st.Size()
			}
		}
	}
	sort.SliceStable(todo, func(x, y int) bool { return size[todo[x]] > size[todo[y]] })
	var next atomic.Int64
	var records atomic.Uint64
	a.chanRecords = make([]uint64, len(a.chans))
	a.stepBack = make([]stepBack, len(a.chans))
	errs := make([]error, workers)
	var failed atomic.Bool
	var wg sync.WaitGroup
	// A token per core: each worker holds one while it decodes, and a file
	// loads frames ahead on the ones free (logfile.LoadAhead), so that
	// when fewer files than workers are left, the cores of the workers
	// done go to the files still being read (one large channel file
	// decodes on every core).
	tokens := make(chan struct{}, workers)
	for wk := 0; wk < workers; wk++ {
		wg.Add(1)
		tokens <- struct{}{}
		go func(wk int) {
			defer wg.Done()
			defer func() { <-tokens }()
			var pw *partWriter
			if ps != nil {
				pw = ps.writer(wk)
			}
			for !failed.Load() {
				k := int(next.Add(1)) - 1
				if k >= len(todo) {
					break
				}
				n, err := a.decodeFile(todo[k], pw, alias, tokens)
				records.Add(n)
				a.chanRecords[todo[k]] = n
				if err != nil {
					errs[wk] = err
					failed.Store(true)
					return
				}
			}
			if pw == nil {
				return
			}
			if err := pw.flushAll(); err != nil {
				errs[wk] = err
				failed.Store(true)
			}
		}(wk)
	}
	wg.Wait()
	a.res.Records = records.Load()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeFile decodes channel ch's file into pw, an output id's records
// under the id alias maps it to; it returns the records read.
func (a *analysis) decodeFile(ch int, pw *partWriter, alias lineageMap, tokens chan struct{}) (uint64, error) {
	c := a.chans[ch]
	lf, err := logfile.Open(c.Path)
	if err != nil {
		return 0, err
	}
	defer lf.Close()
	lf.LoadAhead(tokens)
	var n uint64
	if pw == nil { // DecodeFloor
		err = lf.RecordBatches(func(rs []logfile.Record) error { n += uint64(len(rs)); return nil })
		return n, c.ReadDone(lf, err)
	}
	if err := pw.setChannel(uint32(ch)); err != nil {
		return 0, err
	}
	// The run's span (tupleSpan): each channel's smallest and largest TSC;
	// and its largest step back (contradict.go).
	lo, hi := uint64(math.MaxUint64), uint64(0)
	var back stepBack
	var dep *critpath.DepIndex // its counters' index (critpath.go)
	if a.cp.deps != nil {
		dep = a.cp.deps[ch]
	}
	remap := len(alias) > 0 // once per file: no lineage, no lookup
	// A record that followed a wait of its thread goes to the spill with
	// the file's own mark of it, bit 63 of its counter (logfile.WaitedBit;
	// a counter never reaches it): the join takes it off again
	// (radixKey.event), so that the flag costs no memory of its own.
	notes := lf.Header.Waits != ""
	mark := func(r *logfile.Record) uint64 {
		if r.Waited {
			return r.TSC | logfile.WaitedBit
		}
		return r.TSC
	}
	err = lf.RecordBatches(func(rs []logfile.Record) error {
		if remap {
			for i := range rs {
				id := rs[i].TupleID
				if in, ok := alias[id]; ok {
					id = in
				}
				if err := pw.add(id, mark(&rs[i])); err != nil {
					return err
				}
			}
		} else if err := pw.addRecords(rs, notes); err != nil {
			return err
		}
		for i, r := range rs {
			if r.TSC < hi && hi-r.TSC > back.cycles {
				back = stepBack{record: n + uint64(i), from: hi, cycles: hi - r.TSC}
			}
			lo, hi = min(lo, r.TSC), max(hi, r.TSC)
		}
		if dep != nil && !dep.AddRecords(rs) {
			dep = nil // given up: Done says so
		}
		n += uint64(len(rs))
		a.progress.records.Add(uint64(len(rs)))
		return nil
	})
	a.tscMin[ch], a.tscMax[ch], a.stepBack[ch] = lo, hi, back
	a.notesWaits[ch] = notes
	return n, c.ReadDone(lf, err)
}

// DecodeFloor decodes the tuple records of cfg's logs as the analysis does
// (same files, same workers) and does nothing else: the floor that
// analyze's speed is measured against. It returns the records decoded.
func DecodeFloor(cfg Config) (uint64, error) {
	a, err := prepare(cfg)
	if err != nil {
		return 0, err
	}
	if err := a.decodeAll(nil, a.cfg.Workers); err != nil {
		return 0, err
	}
	return a.res.Records, nil
}
