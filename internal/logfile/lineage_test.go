package logfile

import (
	"encoding/binary"
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// A LINEAGE file's TSC column holds input ids: any order, any sign, jumps
// across the whole range. The column encoding (deltas, zigzag varints) and
// every codec must give them back exactly.
func TestColumnsRoundTripNonMonotoneTSC(t *testing.T) {
	r := rand.New(rand.NewSource(18))
	const n = 5000
	for _, recSize := range []int{16, 24} {
		raw := make([]byte, n*recSize)
		for i := 0; i < n; i++ {
			var in int64
			switch i % 5 {
			case 0:
				in = r.Int63n(1000) // small, going back and forth
			case 1:
				in = -r.Int63() // negative
			case 2:
				in = r.Int63() // anywhere
			case 3:
				in = []int64{0, 1, -1, math.MaxInt64, math.MinInt64 + 1}[r.Intn(5)]
			default:
				in = int64(i) // a run that counts
			}
			binary.LittleEndian.PutUint64(raw[i*recSize:], uint64(1_000_000+i/4))
			binary.LittleEndian.PutUint64(raw[i*recSize+8:], LineageTSC(in))
			if recSize == 24 {
				binary.LittleEndian.PutUint64(raw[i*recSize+16:], uint64(r.Int63()))
			}
		}
		for _, codec := range []int{CodecColumns, CodecZstd, CodecS2} {
			cols := EncodeColumns(nil, raw, n, recSize)
			packed := Compress(nil, cols, codec)
			un, err := Decompress(nil, packed, codec, len(cols))
			require.NoError(t, err)
			back, err := DecodeColumns(nil, un, n, recSize)
			require.NoError(t, err)
			require.Equal(t, raw, back, "record size %d codec %d", recSize, codec)
		}
	}
}

func TestLineageTSCInverse(t *testing.T) {
	for _, in := range []int64{0, 1, -1, 42, math.MaxInt64, math.MinInt64 + 1} {
		require.NotZero(t, LineageTSC(in), "never the mark of an unwritten position")
		require.Equal(t, in, LineageInput(LineageTSC(in)))
	}
}
