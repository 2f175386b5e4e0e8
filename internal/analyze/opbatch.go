package analyze

import (
	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/critpath"
)

// opBatchTuples is how many tuples an opBatch holds before the operator
// analyses take them.
const opBatchTuples = 2048

// opBatch holds a worker's tuples for the operator analyses (capacity,
// Mace, the critical path) and hands them over a batch at a time, one
// analysis after the other. Fed a tuple at a time, each analysis ran
// between the others and the durations, and each pushed the others'
// tables (cells by window, the departure index) out of the cache: the
// durations' own work took 30% longer with the analyses on than off.
// A batch keeps one analysis's tables warm through its loop.
type opBatch struct {
	evs    []critpath.Event // the tuples' records, one after the other
	tuples []opTuple
}

type opTuple struct {
	id     int64
	end    int // its records end at evs[end]
	e2eErr float64
}

// add takes one tuple's hops, in rank order with each process's records
// in time order (ana), each hop's bound (errs[i]: ana[i-1] to ana[i]) and
// the end-to-end bound.
func (b *opBatch) add(w *worker, ana []event, errs []float64, e2eErr float64) error {
	for k := range ana {
		b.evs = append(b.evs, critpath.Event{Ch: ana[k].ch, Waited: ana[k].waited, Est: ana[k].est, Err: errs[k], Raw: ana[k].tsc})
	}
	return b.endTuple(w, ana[0].id, e2eErr)
}

// endTuple ends the tuple whose records were appended to b.evs since the
// last one ended.
func (b *opBatch) endTuple(w *worker, id int64, e2eErr float64) error {
	b.tuples = append(b.tuples, opTuple{id: id, end: len(b.evs), e2eErr: e2eErr})
	if len(b.tuples) < opBatchTuples {
		return nil
	}
	return b.flush(w)
}

// flush hands the batch to the worker's analyses and empties it.
func (b *opBatch) flush(w *worker) error {
	defer func() { b.evs, b.tuples = b.evs[:0], b.tuples[:0] }()
	if w.cap != nil {
		// The records as capacity and Mace take them, made once.
		ce := w.capEvs[:0]
		for _, e := range b.evs {
			ce = append(ce, capacity.Event{Ch: e.Ch, Est: e.Est})
		}
		w.capEvs = ce
		from := 0
		for _, t := range b.tuples {
			w.cap.Tuple(ce[from:t.end])
			from = t.end
		}
		if w.mace != nil {
			plan := w.a.cap.plan
			from = 0
			for _, t := range b.tuples {
				evs := ce[from:t.end]
				// A tuple that ends at a lineage mark was absorbed into
				// another: its latency is that tuple's.
				journey := true
				if n := len(evs); n > 1 {
					inst, role := plan.Role(int(evs[n-1].Ch))
					journey = !(inst >= 0 && role == capacity.RoleIn && plan.Instances[inst].Has(capacity.RoleLineage))
				}
				w.mace.Tuple(t.id, evs, journey)
				from = t.end
			}
		}
	}
	if w.cpc != nil {
		from := 0
		for _, t := range b.tuples {
			if err := w.cpc.Tuple(b.evs[from:t.end], t.e2eErr); err != nil {
				return err
			}
			from = t.end
		}
	}
	return nil
}
