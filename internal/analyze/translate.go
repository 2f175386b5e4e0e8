package analyze

import (
	"slices"

	"cloudprofiler/minrtt"
)

// Stage 2 of the pipeline (pipeline.go): translation into the reference
// clock. Every tuple record is translated once, when its tuple is joined:
// its estimate in the reference counter (relative to the model's origin)
// and the strict bound of that estimate, by package minrtt; what the
// translation found is kept with the record (minrtt.Translated), so that
// its durations need not translate it again.

// event is one tuple record of one channel, on its way through the join.
type event struct {
	id     int64
	tsc    uint64
	ch     uint32  // index into the analysis's channels
	waited bool    // the instance's thread waited since its previous mark (a marked channel that notes waits)
	est    float64 // reference TSC estimate (relative to the model's origin)
	err    float64 // and its bound
	tr     minrtt.Translated
}

// translate fills est and err of a tuple's records and returns them
// ordered by estimate (then channel, then counter: a total order, so the
// result does not depend on the order records arrived in). The records
// are large (the translation is kept): a small tuple is ordered through
// indices and copied once.
func (w *worker) translate(evs []event) []event {
	for k := range evs {
		e := &evs[k]
		w.a.model.TranslateInto(&e.tr, w.a.chNode[e.ch], e.tsc)
		v := e.tr.Value(w.a.model)
		e.est, e.err = v.Est, v.Err
		if v.Est < w.t0 {
			w.t0 = v.Est
		}
	}
	sorted := true
	for k := 1; k < len(evs) && sorted; k++ {
		sorted = !eventLess(&evs[k], &evs[k-1])
	}
	if sorted {
		return evs
	}
	if len(evs) > len(w.idx) {
		slices.SortFunc(evs, func(a, b event) int {
			switch {
			case eventLess(&a, &b):
				return -1
			case eventLess(&b, &a):
				return 1
			}
			return 0
		})
		return evs
	}
	idx := w.idx[:len(evs)]
	for i := range idx {
		idx[i] = uint8(i)
		for j := i; j > 0 && eventLess(&evs[idx[j]], &evs[idx[j-1]]); j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	w.sorted = w.sorted[:0]
	for _, i := range idx {
		w.sorted = append(w.sorted, evs[i])
	}
	return w.sorted
}

func eventLess(a, b *event) bool {
	if a.est != b.est {
		return a.est < b.est
	}
	if a.ch != b.ch {
		return a.ch < b.ch
	}
	return a.tsc < b.tsc
}
