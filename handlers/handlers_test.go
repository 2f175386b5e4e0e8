package handlers

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNamesRoundTrip(t *testing.T) {
	for h := Identity; h < numTypes; h++ {
		p, err := Parse(h.String())
		require.NoError(t, err)
		require.Equal(t, h, p)
	}
	_, err := Parse("BOGUS")
	require.Error(t, err)
	require.Equal(t, "Handler(99)", Type(99).String())
}

func TestCheckOpen(t *testing.T) {
	require.NoError(t, BufferIdentity.CheckOpen(true))
	require.ErrorIs(t, Identity.CheckOpen(true), ErrFormat)
	require.NoError(t, Identity.CheckOpen(false))
	require.NoError(t, NetConf.CheckOpen(false))
	require.NoError(t, FoxStart.CheckOpen(true))
	require.NoError(t, FoxEnd.CheckOpen(false))
	require.True(t, FoxStart.Ring() && FoxEnd.Ring())
	require.ErrorIs(t, GPIORTT.CheckOpen(false), ErrPlatform)
	require.ErrorIs(t, Type(-1).CheckOpen(false), ErrUnknown)
}

func TestCheckArg(t *testing.T) {
	require.NoError(t, XoY.CheckArg(0, 5, []int64{1, 1024}))
	require.ErrorIs(t, XoY.CheckArg(0, 2000, []int64{1, 1024}), ErrArgValue)
	require.ErrorIs(t, XoY.CheckArg(1, 0, []int64{0, 1024}), ErrArgValue)
	require.ErrorIs(t, XoY.CheckArg(1, 3, []int64{5, 1024}), ErrArgValue, "y below x")
	require.ErrorIs(t, XoY.CheckArg(2, 3, []int64{1, 1024}), ErrArgNum)
	require.ErrorIs(t, Null.CheckArg(0, 3, nil), ErrArgNum)
	require.ErrorIs(t, PeriodicCounter.CheckArg(0, 999_999, []int64{1e9}), ErrArgValue)
	require.NoError(t, Median.CheckArg(0, 100000, []int64{1000}))
	require.ErrorIs(t, Median.CheckArg(0, 100001, []int64{1000}), ErrArgValue)
	require.NoError(t, BufferIdentity.CheckArg(ArgDropWhenFull, 1, nil))
	require.ErrorIs(t, FirstLast.CheckArg(ArgDropWhenFull, 1, nil), ErrArgNum)
	require.ErrorIs(t, Downsample.CheckArg(ArgDropWhenFull, 2, []int64{10}), ErrArgValue)
}

func TestServiceRateArgs(t *testing.T) {
	h := ServiceRate
	require.Equal(t, "SERVICERATE", h.String())
	require.Equal(t, Type(14), h)
	require.True(t, h.Counter())
	require.False(t, h.Ring())
	require.NoError(t, h.CheckOpen(true), "any format: counter records as the counters write them")
	cur := h.Defaults()
	require.Equal(t, []int64{1_000_000_000, 100_000, 16_000_000, 64, 16, 100_000, 1000}, cur)
	for i, n := range []int32{0, 200, 201, 202, 203, 204, 205} {
		require.Equal(t, i, h.Index(n))
	}
	for _, n := range []int32{-1, 1, 2, 100, 199, 206} {
		require.Equal(t, -1, h.Index(n))
		require.ErrorIs(t, h.CheckArg(n, 1, cur), ErrArgNum, "arg %d", n)
	}
	require.ErrorIs(t, h.CheckArg(ArgDropWhenFull, 0, cur), ErrArgNum, "no ring")
	ok := map[int32][2]int64{0: {1_000_000, 1 << 62}, ArgSRMinPeriodNs: {50_000, 16_000_000},
		ArgSRMaxPeriodNs: {100_000, 1_000_000_000}, ArgSRWindow: {8, 4096}, ArgSRWidenAfter: {1, 1_000_000},
		ArgSRStablePPM: {1, 1_000_000}, ArgSRTolerancePPM: {1, 1_000_000}}
	for n, r := range ok {
		require.NoError(t, h.CheckArg(n, r[0], cur), "arg %d = %d", n, r[0])
		require.NoError(t, h.CheckArg(n, r[1], cur), "arg %d = %d", n, r[1])
		require.ErrorIs(t, h.CheckArg(n, r[0]-1, cur), ErrArgValue, "arg %d = %d", n, r[0]-1)
		if n != 0 {
			require.ErrorIs(t, h.CheckArg(n, r[1]+1, cur), ErrArgValue, "arg %d = %d", n, r[1]+1)
		}
	}
	require.ErrorIs(t, h.CheckArg(ArgSRMaxPeriodNs, 99_999, cur), ErrArgValue)
	require.ErrorIs(t, h.CheckArg(ArgSRMinPeriodNs, 16_000_001, cur), ErrArgValue, "min above max")
	require.ErrorIs(t, h.CheckArg(ArgSRMaxPeriodNs, 1_000_000_001, cur), ErrArgValue)
	require.ErrorIs(t, h.CheckArg(ArgSRMinPeriodNs, 1_000_000_001, []int64{1e9, 1e6, 1e9, 64, 16, 1e5, 1e3}), ErrArgValue)
	for i, a := range h.Args() {
		require.Equal(t, h.Index(a.Num), i)
	}
	// The other handlers' argument numbers are their positions.
	for k := Identity; k < numTypes; k++ {
		if k == ServiceRate {
			continue
		}
		for i, a := range k.Args() {
			require.Equal(t, int32(i), a.Num, "%s", k)
		}
	}
}
