package tsc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReadIsMonotonic(t *testing.T) {
	a := Read()
	b := Read()
	require.Greater(t, b, a)
}

func TestFreqAgreesWithCalibration(t *testing.T) {
	f := Freq()
	require.Greater(t, f.Hz, 1e8, "source %s", f.Source)
	cal := Calibrate(100 * time.Millisecond)
	// A noisy VM: agree within 1% (the methods measure the same counter).
	require.InEpsilon(t, cal, f.Hz, 0.01, "freq %v from %s, calibrated %v", f.Hz, f.Source, cal)
	t.Logf("TSC %.6f GHz from %s; calibrated %.6f GHz", f.Hz/1e9, f.Source, cal/1e9)
}

func TestInvariant(t *testing.T) {
	ok, why := Invariant()
	t.Logf("invariant=%v (%s)", ok, why)
}

func TestFakeParseAndApply(t *testing.T) {
	f, err := ParseFake("1.5:1000")
	require.NoError(t, err)
	require.Equal(t, uint64(3<<31), f.RateQ32)
	require.Equal(t, uint64(1000+15), f.Apply(10))
	require.Equal(t, uint64(1000+16), f.Apply(11)) // floor(16.5)
	require.Equal(t, "1.5:1000", f.String())
	// Large raw values do not overflow: 2^60 * 1.5 fits in 64 bits.
	require.Equal(t, uint64(3)<<59+1000, f.Apply(1<<60))

	g, err := ParseFake("0.9999:-5")
	require.NoError(t, err)
	require.InDelta(t, 0.9999, g.Rate(), 1e-9)

	for _, bad := range []string{"", "1.0", "x:1", "1:y", "0:0", "1000:0", "1:-99999999999999999999", "1:-9223372036854775807"} {
		_, err := ParseFake(bad)
		require.Error(t, err, bad)
	}
}

func TestReadAndFreqFollowTheFake(t *testing.T) {
	defer SetFake(nil)
	require.NoError(t, SetFakeFrom("2:1000000"))
	hw := HardwareFreq()
	require.InEpsilon(t, 2*hw.Hz, Freq().Hz, 1e-9)
	require.Contains(t, Freq().Source, "fake rate 2")
	raw0 := Raw()
	v := Read()
	raw1 := Raw()
	f, ok := ActiveFake()
	require.True(t, ok)
	require.GreaterOrEqual(t, v, f.Apply(raw0))
	require.LessOrEqual(t, v, f.Apply(raw1))
	require.NoError(t, SetFakeFrom(""))
	_, ok = ActiveFake()
	require.False(t, ok)
	require.Equal(t, hw, Freq())
}
