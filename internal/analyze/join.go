package analyze

import (
	"math/bits"
)

// Stage 4 of the pipeline (pipeline.go): the join. A partition's records
// are grouped by tuple id with a radix sort (linear in the records: 11-bit
// digits over only the bits in which the partition's ids differ; stable, so
// a tuple's records keep their arrival order), and each tuple's records go
// to the aggregation (aggregate.go) together.

// radixKey is a record's place in the sort: its id as an unsigned key and
// its index in the partition.
type radixKey struct {
	k uint64
	i uint32
}

// grouper sorts partitions by id, reusing its arrays.
type grouper struct {
	a, b []radixKey
}

const radixBits = 11

// sortByID returns the partition's record indices ordered by tuple id
// (signed order), equal ids in arrival order.
func (g *grouper) sortByID(ids []int64) []radixKey {
	n := len(ids)
	if cap(g.a) < n {
		g.a, g.b = make([]radixKey, n), make([]radixKey, n)
	}
	a, b := g.a[:n], g.b[:n]
	if n == 0 {
		return a
	}
	lo, hi := ^uint64(0), uint64(0)
	sorted := true
	prev := uint64(0)
	for i, id := range ids {
		k := uint64(id) ^ (1 << 63) // signed order as unsigned
		lo, hi = min(lo, k), max(hi, k)
		if k < prev {
			sorted = false
		}
		prev = k
		a[i] = radixKey{k, uint32(i)}
	}
	if sorted {
		return a
	}
	width := bits.Len64(hi - lo)
	var counts [1 << radixBits]int
	for shift := 0; shift < width; shift += radixBits {
		clear(counts[:])
		for _, x := range a {
			counts[((x.k-lo)>>shift)&(1<<radixBits-1)]++
		}
		sum := 0
		for d, c := range counts {
			counts[d] = sum
			sum += c
		}
		for _, x := range a {
			d := ((x.k - lo) >> shift) & (1<<radixBits - 1)
			b[counts[d]] = x
			counts[d]++
		}
		a, b = b, a
	}
	return a
}

// joinPartition calls fn with every tuple of the partition: its records in
// arrival order (fn may reorder them; the slice is reused).
func (w *worker) joinPartition(d *partData, fn func([]event) error) error {
	order := w.g.sortByID(d.id)
	for s := 0; s < len(order); {
		e := s + 1
		for e < len(order) && order[e].k == order[s].k {
			e++
		}
		w.evs = w.evs[:0]
		for _, o := range order[s:e] {
			w.evs = append(w.evs, event{id: d.id[o.i], tsc: d.tsc[o.i], ch: d.ch[o.i]})
		}
		if err := fn(w.evs); err != nil {
			return err
		}
		s = e
	}
	return nil
}
