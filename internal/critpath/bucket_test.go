package critpath

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBucketsOrderedAndNarrow(t *testing.T) {
	require.Equal(t, int32(0), bucketOf(0))
	require.Less(t, bucketOf(-5), int32(0))
	require.Less(t, bucketOf(-50), bucketOf(-5))
	require.Equal(t, -bucketOf(math.MaxInt64), bucketOf(math.MinInt64))
	prev := int32(0)
	for v := int64(1); v < math.MaxInt64/3; v = v*3/2 + 1 {
		b := bucketOf(v)
		require.GreaterOrEqual(t, b, prev)
		require.LessOrEqual(t, int(b), posBuckets)
		prev = b
	}
	// 0.1%: values 0.2% apart never share a bucket.
	for v := int64(1000); v < 1e15; v = v * 7 / 5 {
		require.NotEqual(t, bucketOf(v), bucketOf(v+v/500+1))
	}
}
