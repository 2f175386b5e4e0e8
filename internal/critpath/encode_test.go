package critpath

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVisitEncodingRoundTrips(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	vs := make([]Visit, 20000)
	in := int64(-1 << 40)
	for i := range vs {
		in += r.Int64N(1 << uint(r.IntN(40)+1))
		v := Visit{In: in, Out: in + r.Int64N(1000), Inst: uint16(r.IntN(3)), Up: noHandOff, Bucket: int32(r.IntN(3)) - 1}
		v.Dep = v.Out + r.Int64N(3)
		if r.IntN(4) > 0 {
			v.Up, v.H, v.Link = uint16(r.IntN(4)), in-r.Int64N(math.MaxInt64/4)+1e6, uint16(r.IntN(2))
		}
		if r.IntN(3) == 0 {
			v.Err = r.Float32() * 1e6
		}
		v.Next = uint16(r.IntN(2))
		vs[i] = v
	}
	var b []byte
	var prev Visit
	for i := range vs {
		b = appendVisit(b, &vs[i], &prev)
		prev = vs[i]
	}
	rd := visitReader{b: b}
	for i := range vs {
		var v Visit
		require.NoError(t, rd.next(&v))
		require.Equal(t, vs[i], v, "visit %d", i)
	}
	require.Empty(t, rd.b)
	require.Error(t, (&visitReader{b: b[:3]}).next(new(Visit)))
}
