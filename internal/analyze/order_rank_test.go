package analyze

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rankCubic is rankChannels as it was (an n x n matrix, every pick scanning
// it): the reference the edge lists must match, order for order.
func rankCubic(a *analysis, ov orderVotes) []int {
	n := len(a.chans)
	given := map[int]int{}
	for pos, label := range a.cfg.Order {
		for i, c := range a.chans {
			if c.Label() == label || c.Name == label {
				given[i] = pos
			}
		}
	}
	before := make([][]bool, n)
	for i := range before {
		before[i] = make([]bool, n)
	}
	wins := make([]int, n)
	decide := func(x, y int, hard bool) {
		wins[x]++
		if hard {
			before[x][y] = true
		}
	}
	for k, v := range ov {
		x, y := int(k[0]), int(k[1])
		px, okx := given[x]
		py, oky := given[y]
		switch {
		case okx && oky && px != py:
			if px < py {
				decide(x, y, true)
			} else {
				decide(y, x, true)
			}
		case v.sure[0] > v.sure[1]:
			decide(x, y, true)
		case v.sure[1] > v.sure[0]:
			decide(y, x, true)
		case v.likely[0] > v.likely[1]:
			decide(x, y, false)
		case v.likely[1] > v.likely[0]:
			decide(y, x, false)
		}
	}
	for x, px := range given {
		for y, py := range given {
			if px < py && !before[x][y] && !before[y][x] {
				decide(x, y, true)
			}
		}
	}
	placed := make([]bool, n)
	rank := make([]int, n)
	better := func(x, y int) bool {
		if _, okx := given[x]; okx {
			if _, oky := given[y]; oky && given[x] != given[y] {
				return given[x] < given[y]
			}
		}
		if wins[x] != wins[y] {
			return wins[x] > wins[y]
		}
		return a.chans[x].Label() < a.chans[y].Label()
	}
	for r := 0; r < n; r++ {
		pick, pickFree := -1, false
		for x := 0; x < n; x++ {
			if placed[x] {
				continue
			}
			free := true
			for y := 0; y < n && free; y++ {
				free = placed[y] || !before[y][x]
			}
			if pick < 0 || (free && !pickFree) || (free == pickFree && better(x, pick)) {
				pick, pickFree = x, free
			}
		}
		placed[pick] = true
		rank[pick] = r
	}
	a.sentAfterOut(rank)
	return rank
}

// randomOrderCase: n channels on a few nodes, votes on random pairs (sure,
// likely, ties; cycles of sure relations too), and some channels listed in
// Config.Order.
func randomOrderCase(r *rand.Rand, n int, pairs int) (*analysis, orderVotes) {
	a := &analysis{}
	for i := 0; i < n; i++ {
		a.chans = append(a.chans, &Channel{Node: fmt.Sprintf("n%d", r.Intn(4)), PID: 1 + r.Intn(3), Name: fmt.Sprintf("c%03d", r.Intn(n*2))})
	}
	for i := 0; i < n; i++ {
		if r.Intn(8) == 0 {
			a.cfg.Order = append(a.cfg.Order, a.chans[i].Label())
		}
	}
	a.indexChannels()
	ov := orderVotes{}
	for p := 0; p < pairs; p++ {
		x, y := uint32(r.Intn(n)), uint32(r.Intn(n))
		if x == y {
			continue
		}
		if x > y {
			x, y = y, x
		}
		v := ov[[2]uint32{x, y}]
		if v == nil {
			v = &votes{}
			ov[[2]uint32{x, y}] = v
		}
		v.sure[r.Intn(2)] += uint64(r.Intn(3))
		v.likely[r.Intn(2)] += uint64(r.Intn(4))
	}
	return a, ov
}

// The edge lists order every channel as the matrix did, on random votes
// with ties, cycles and a user's order.
func TestRankChannelsAsBefore(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for c := 0; c < 300; c++ {
		n := 2 + r.Intn(40)
		a, ov := randomOrderCase(r, n, r.Intn(n*n))
		want := rankCubic(a, ov)
		got, err := a.rankChannels(ov)
		require.NoError(t, err)
		require.Equal(t, want, got, "case %d: %d channels, %d voted pairs, order %v", c, n, len(ov), a.cfg.Order)
	}
}

// BenchmarkRankChannels: a pipeline of n channels (each tuple crossing 8
// consecutive ones). It prints what 10,000 channels take (the issue: 4,000
// took over 200 s).
func BenchmarkRankChannels(b *testing.B) {
	for _, n := range []int{1000, 4000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			a := &analysis{}
			for i := 0; i < n; i++ {
				a.chans = append(a.chans, &Channel{Node: fmt.Sprintf("n%d", i%16), PID: i, Name: fmt.Sprintf("s%05d in", i)})
			}
			a.indexChannels()
			ov := orderVotes{}
			for i := 0; i < n; i++ {
				for d := 1; d < 8 && i+d < n; d++ {
					ov[[2]uint32{uint32(i), uint32(i + d)}] = &votes{sure: [2]uint64{5, 0}}
				}
			}
			start := time.Now()
			for k := 0; k < b.N; k++ {
				if _, err := a.rankChannels(ov); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "s/rank")
		})
	}
}
