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
