package critpath

import (
	"math/rand"
	"sort"
	"sync/atomic"
	"testing"

	"cloudprofiler/internal/logfile"

	"github.com/stretchr/testify/require"
)

func TestDepIndex(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, n := range []int{0, 1, 63, 64, 65, 1000, 5000} {
		var budget atomic.Int64
		budget.Store(1 << 30)
		x := NewDepIndex(&budget, "")
		var vs []uint64
		v := uint64(1000)
		for i := 0; i < n; i++ {
			switch r.Intn(4) {
			case 0: // equal
			case 1:
				v += uint64(r.Intn(1 << 20))
				if r.Intn(50) == 0 {
					v += 1 << 40
				}
			default:
				v += uint64(r.Intn(1000))
			}
			vs = append(vs, v)
			if !x.Add(v) {
				t.Fatal("given up")
			}
		}
		if !x.Done() || x.Len() != n {
			t.Fatal("done")
		}
		cur := 0
		for k := 0; k < 20000; k++ {
			q := uint64(r.Int63n(int64(v + 2000)))
			if k%3 == 0 {
				cur = r.Intn(n + 1)
			}
			i := sort.Search(len(vs), func(i int) bool { return vs[i] >= q }) - 1
			got, ok := x.Before(q, &cur)
			if ok != (i >= 0) || ok && got != vs[i] {
				t.Fatalf("n %d: before %d: %d %v, want %d", n, q, got, ok, i)
			}
		}
	}
	var budget atomic.Int64
	budget.Store(1 << 30)
	x := NewDepIndex(&budget, "")
	x.Add(5)
	if x.Add(4) || x.Done() {
		t.Fatal("unsorted kept")
	}
	budget.Store(100)
	x = NewDepIndex(&budget, "")
	for i := 0; i < 1000; i++ {
		x.Add(uint64(i * 1000))
	}
	if x.Done() {
		t.Fatal("past the budget kept")
	}
}

// AddRecords gives the index Add gives.
func TestDepIndexAddRecords(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	var rs []logfile.Record
	tsc := uint64(1 << 40)
	for i := 0; i < 100000; i++ {
		tsc += uint64(r.ExpFloat64() * float64([]int{10, 1000, 1 << 20}[i/20000%3]))
		rs = append(rs, logfile.Record{TupleID: int64(i), TSC: tsc})
	}
	one, all := NewDepIndex(nil, ""), NewDepIndex(nil, "")
	for _, rec := range rs {
		require.True(t, one.Add(rec.TSC))
	}
	for k := 0; k < len(rs); k += 777 {
		require.True(t, all.AddRecords(rs[k:min(k+777, len(rs))]))
	}
	require.True(t, one.Done())
	require.True(t, all.Done())
	require.Equal(t, one.first, all.first)
	require.Equal(t, one.meta, all.meta)
	require.Equal(t, one.words, all.words)
	// Counters that go back give the index up.
	bad := NewDepIndex(nil, "")
	require.False(t, bad.AddRecords([]logfile.Record{{TSC: 5}, {TSC: 9}, {TSC: 7}}))
	require.False(t, bad.Done())
}

// Past its budget an index with a directory moves its lines to a file and
// goes on with blocks of bigLines lines: every lookup (block, then Lookup
// through a window, in climbing order and at random) gives the latest
// counter below the query, as the counters say; in memory only the
// blocks' first counters and metas remain, within the budget.
func TestDepIndexSpilled(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	for _, gap := range []int{30, 1000, 1 << 22} {
		var budget atomic.Int64
		budget.Store(20 << 10)
		x := NewDepIndex(&budget, t.TempDir())
		var vs []uint64
		v := uint64(1 << 41)
		for i := 0; i < 200000; i++ {
			if r.Intn(10) > 0 {
				v += uint64(r.Intn(gap))
			}
			vs = append(vs, v)
			require.True(t, x.Add(v), "gap %d: counter %d", gap, i)
		}
		require.True(t, x.Done())
		require.True(t, x.Spilled(), "gap %d", gap)
		require.Nil(t, x.words)
		require.GreaterOrEqual(t, budget.Load(), int64(0))
		require.Greater(t, x.bigFrom, 0, "blocks of one line before the spill")
		require.Greater(t, len(x.first), x.bigFrom, "and of bigLines after it")
		require.Equal(t, len(vs), x.Len())
		t.Logf("gap %d: %d blocks (%d of one line), %d bytes in memory, %d in the file", gap, len(x.first), x.bigFrom, x.Bytes(), x.fileWords*8)
		var win DepWindow
		cur := 0
		for k := 0; k < 50000; k++ {
			var q uint64
			if k < 25000 { // climbing, as a partition's lookups
				q = vs[0] + uint64(k)*(v-vs[0])/25000
			} else {
				q = vs[0] - 5 + uint64(r.Int63n(int64(v-vs[0]+10)))
			}
			i := sort.Search(len(vs), func(i int) bool { return vs[i] >= q }) - 1
			b := x.block(q, &cur)
			require.Equal(t, i >= 0, b >= 0, "gap %d: %d", gap, q)
			if b < 0 {
				continue
			}
			got, err := x.Lookup(b, q, &win)
			require.NoError(t, err)
			require.Equal(t, vs[i], got, "gap %d: before %d", gap, q)
		}
	}
}

// An index told it will not fit (InFile) keeps its lines in the file from
// its first block, all of them blocks of bigLines lines, and answers as
// the counters say.
func TestDepIndexInFile(t *testing.T) {
	r := rand.New(rand.NewSource(6))
	var budget atomic.Int64
	budget.Store(16 << 10) // its first counters and metas: 10 bytes a block of up to 255
	x := NewDepIndex(&budget, t.TempDir())
	x.InFile()
	var vs []uint64
	v := uint64(1 << 30)
	for i := 0; i < 100000; i++ {
		v += uint64(r.Intn(5000))
		vs = append(vs, v)
		require.True(t, x.Add(v))
	}
	require.True(t, x.Done())
	require.True(t, x.Spilled())
	require.Zero(t, x.bigFrom)
	require.Nil(t, x.words)
	require.Less(t, len(x.first), len(vs)/100, "blocks of bigLines lines: over a hundred counters each")
	var win DepWindow
	cur := 0
	for k := 0; k < 20000; k++ {
		q := vs[0] + uint64(r.Int63n(int64(v-vs[0])+1))
		i := sort.Search(len(vs), func(i int) bool { return vs[i] >= q }) - 1
		b := x.block(q, &cur)
		require.Equal(t, i >= 0, b >= 0)
		if b >= 0 {
			got, err := x.Lookup(b, q, &win)
			require.NoError(t, err)
			require.Equal(t, vs[i], got)
		}
	}
}
