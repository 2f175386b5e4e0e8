package critpath

import (
	"slices"

	"cloudprofiler/internal/runmerge"
)

// A run's visits are sorted by (In, Inst) through keys: the visits stay
// where they are, the keys (16 bytes) are radix-sorted, and the run is
// encoded in the keys' order. The slices' own sort took 14% of analyze's
// time on make bench-analyze's data (48-byte swaps); the radix sort, about
// a tenth of that. A run is often a few ascending runs of keys already
// (a partition's tuples come in id order, and a source that numbers its
// tuples in order makes their visits climb with their ids): those are
// merged pairwise instead, stable as the radix sort, when that takes
// fewer passes.

type sortKey struct {
	k uint64 // (In - the run's least In) << (the bits of the largest Inst) | Inst
	i uint32 // the visit's place in the buffer
}

// sortedKeys returns the buffer's order, in keys (reused).
func sortedKeys(vs []Visit, keys, tmp []sortKey) ([]sortKey, []sortKey) {
	keys, tmp = keys[:0], tmp[:0]
	if len(vs) == 0 {
		return keys, tmp
	}
	lo := vs[0].In
	hi := lo
	for i := range vs {
		lo, hi = min(lo, vs[i].In), max(hi, vs[i].In)
	}
	span := uint64(hi - lo)
	// The instance below In in the key, in as few bits as it needs.
	maxInst := uint16(0)
	for i := range vs {
		maxInst = max(maxInst, vs[i].Inst)
	}
	ib := 0
	for x := maxInst; x > 0; x >>= 1 {
		ib++
	}
	bits := ib
	for s := span; s > 0; s >>= 1 {
		bits++
	}
	if bits > 64 {
		sortVisits(vs)
		for i := range vs {
			keys = append(keys, sortKey{0, uint32(i)})
		}
		return keys, tmp
	}
	for i := range vs {
		keys = append(keys, sortKey{uint64(vs[i].In-lo)<<ib | uint64(vs[i].Inst), uint32(i)})
	}
	tmp = slices.Grow(tmp, len(keys))[:len(keys)]
	const digit = 11
	if passes := (bits + digit - 1) / digit; passes > 1 {
		// Fewer than 2^(passes-1) ascending runs merge in fewer passes.
		most := 1 << (passes - 1)
		runs := 1
		for i := 1; i < len(keys) && runs < most; i++ {
			if keys[i].k < keys[i-1].k {
				runs++
			}
		}
		if runs < most {
			keys, tmp = mergeKeyRuns(keys, tmp)
			return orderTies(vs, keys), tmp
		}
	}
	// LSD, stable, 11 bits a pass (the counts stay in the L1 cache).
	var count [1 << digit]int
	const mask = uint64(1)<<digit - 1
	src, dst := keys, tmp
	for shift := 0; shift < bits; shift += digit {
		clear(count[:])
		for _, k := range src {
			count[(k.k>>shift)&mask]++
		}
		if count[(src[0].k>>shift)&mask] == len(src) {
			continue // one digit for all: nothing to move
		}
		sum := 0
		for d := range count {
			sum, count[d] = sum+count[d], sum
		}
		for _, k := range src {
			d := (k.k >> shift) & mask
			dst[count[d]] = k
			count[d]++
		}
		src, dst = dst, src
	}
	return orderTies(vs, src), dst
}

// orderTies orders each run of equal keys (visits of one instance at one
// in) by visitCmp, so that the order is total (visitCmp says why).
func orderTies(vs []Visit, keys []sortKey) []sortKey {
	for i := 1; i < len(keys); i++ {
		if keys[i].k != keys[i-1].k {
			continue
		}
		for j := i; j > 0 && keys[j].k == keys[j-1].k && visitCmp(&vs[keys[j].i], &vs[keys[j-1].i]) < 0; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// RunKey is what a run of keys ascends in (package runmerge).
func (k sortKey) RunKey() uint64 { return k.k }

// mergeKeyRuns sorts keys, a few ascending runs, with package runmerge
// (tmp the other buffer, as long); equal keys keep their order, as in the
// radix sort.
func mergeKeyRuns(keys, tmp []sortKey) ([]sortKey, []sortKey) {
	starts := []int{0}
	for i := 1; i < len(keys); i++ {
		if keys[i].k < keys[i-1].k {
			starts = append(starts, i)
		}
	}
	return runmerge.Sort(keys, tmp, starts)
}
