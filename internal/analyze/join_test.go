package analyze

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/logfile"
)

// sortByID is a stable sort by id, whichever way it takes: one run, a few
// ascending runs merged, or the radix sort (many runs, wide or narrow ids).
func TestSortByIDIsStable(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	var g grouper
	for _, c := range []struct {
		name       string
		n, runs    int
		span       int64
		signedWide bool
	}{
		{"empty", 0, 1, 10, false}, {"one run", 1000, 1, 1 << 20, false}, {"two runs", 1000, 2, 100, false},
		{"five runs", 5000, 5, 1 << 30, false}, {"many runs narrow", 20000, 5000, 50, false},
		{"many runs wide", 20000, 20000, 0, true}, {"few runs wide", 3000, 3, 0, true},
	} {
		ids := make([]int64, c.n)
		per := max(c.n/c.runs, 1)
		for i := range ids {
			if c.signedWide {
				ids[i] = int64(r.Uint64())
			} else {
				ids[i] = r.Int63n(c.span) - c.span/2
			}
		}
		for s := 0; s < len(ids); s += per { // ascending runs
			slices.Sort(ids[s:min(s+per, len(ids))])
		}
		want := make([]int, len(ids))
		for i := range want {
			want[i] = i
		}
		slices.SortStableFunc(want, func(x, y int) int {
			switch {
			case ids[x] < ids[y]:
				return -1
			case ids[x] > ids[y]:
				return 1
			}
			return 0
		})
		d := &partData{id: ids, tsc: make([]uint64, len(ids)), ch: make([]uint32, len(ids))}
		for i := range ids {
			d.tsc[i], d.ch[i] = uint64(i)*3, uint32(i%7)
		}
		got := g.sortByID(d)
		require.Len(t, got, len(ids), c.name)
		for i, k := range got {
			require.Equal(t, want[i], int(k.i), "%s: position %d", c.name, i)
			require.Equal(t, ids[k.i], k.id(), "%s: position %d", c.name, i)
			require.Equal(t, uint64(k.i)*3, k.tsc, "%s: position %d", c.name, i)
			require.Equal(t, k.i%7, k.ch, "%s: position %d", c.name, i)
		}
	}
}

// A partition of few ascending runs is joined by merging them (eachMerged):
// the same tuples, in the same order, each tuple's records in the same
// order, as sorting it first gives (eachSorted), on partitions with an id
// repeated in a run and across runs, a run that ends first, a reused id
// past maxTupleEvents, and negative ids.
func TestEachMergedIsEachSorted(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	collect := func(each func(*partData, func([]radixKey) error) error, d *partData) (tuples [][]radixKey) {
		require.NoError(t, each(d, func(recs []radixKey) error {
			tuples = append(tuples, slices.Clone(recs))
			return nil
		}))
		return tuples
	}
	for trial := 0; trial < 300; trial++ {
		runs := 1 + r.Intn(maxMergeRuns)
		var ids []int64
		for k := 0; k < runs; k++ {
			run := make([]int64, r.Intn(200))
			span := int64(1 + r.Intn(300))
			for i := range run {
				run[i] = r.Int63n(span) - span/3
			}
			if trial%50 == 0 && k == 0 { // a reused id
				for i := 0; i < maxTupleEvents+10; i++ {
					run = append(run, 7)
				}
			}
			slices.Sort(run)
			if k > 0 && len(run) > 0 && len(ids) > 0 && run[0] >= ids[len(ids)-1] {
				run[0] = ids[len(ids)-1] - 1 // a new run, not the last one's tail
				slices.Sort(run)
			}
			ids = append(ids, run...)
		}
		d := &partData{id: ids, tsc: make([]uint64, len(ids)), ch: make([]uint32, len(ids))}
		for i := range ids {
			d.tsc[i], d.ch[i] = r.Uint64(), uint32(r.Intn(5))
		}
		var g grouper
		require.LessOrEqual(t, g.findRuns(ids), runs, "trial %d", trial)
		merged := collect(g.eachMerged, d)
		var g2 grouper
		sorted := collect(g2.eachSorted, d)
		require.Equal(t, sorted, merged, "trial %d: %d runs, %d records", trial, runs, len(ids))
		n := 0
		for _, tu := range merged {
			n += len(tu)
		}
		require.Equal(t, len(ids), n, "trial %d: every record once", trial)
	}
}

// addRecords writes the blocks add writes a record at a time: the same
// records in each partition's blocks, in the same order, waits in bit 63
// where the channel notes them; in memory and spilled.
func TestAddRecordsIsAdd(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, spill := range []bool{false, true} {
		for _, noted := range []bool{false, true} {
			var rs []logfile.Record
			id := int64(-300)
			for len(rs) < 20000 {
				id += int64(r.Intn(3)) // runs of one id, of one group, across groups
				if r.Intn(50) == 0 {
					id = r.Int63n(1 << 40)
				}
				rs = append(rs, logfile.Record{TupleID: id, TSC: r.Uint64() >> 2, Waited: r.Intn(4) == 0})
			}
			var got [2]*partitions
			for v := range got {
				budget := int64(256 << 20)
				if spill {
					budget = 64 << 10
				}
				p, err := partitionPlan(uint64(len(rs))*64, 1, 1, budget, t.TempDir())
				require.NoError(t, err)
				p.group = 4
				require.Equal(t, spill, p.spill)
				w := p.writer(0)
				require.NoError(t, w.setChannel(3))
				for s := 0; s < len(rs); s += 777 { // batches as decoding gives them
					batch := rs[s:min(s+777, len(rs))]
					if v == 0 {
						for i := range batch {
							tsc := batch[i].TSC
							if noted && batch[i].Waited {
								tsc |= logfile.WaitedBit
							}
							require.NoError(t, w.add(batch[i].TupleID, tsc))
						}
					} else {
						require.NoError(t, w.addRecords(batch, noted))
					}
				}
				require.NoError(t, w.flushAll())
				got[v] = p
			}
			for k := 0; k < got[0].n; k++ {
				var d [2]partData
				for v := range got {
					require.NoError(t, got[v].read(k, &d[v]))
				}
				require.Equal(t, d[0].id, d[1].id, "partition %d", k)
				require.Equal(t, d[0].tsc, d[1].tsc, "partition %d", k)
				require.Equal(t, d[0].ch, d[1].ch, "partition %d", k)
			}
			for v := range got {
				got[v].close()
			}
		}
	}
}
