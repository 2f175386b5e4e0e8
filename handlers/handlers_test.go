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
