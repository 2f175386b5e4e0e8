package probe

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// What adjtimex reads becomes how fast CLOCK_REALTIME may drift from its
// clocksource: a quiet clock passes, chrony's slews (ticks of up to 8.3%
// off), a frequency at the kernel's limit plus an adjtime slew, and an
// offset the phase-locked loop corrects fast do not.
func TestSlewOf(t *testing.T) {
	for _, c := range []struct {
		name    string
		tx      unix.Timex
		adjtime bool
		want    float64
	}{
		{"unsynchronised", unix.Timex{Tick: 10000, Status: unix.STA_UNSYNC}, false, 0},
		{"ntp, 37 ppm", unix.Timex{Tick: 10000, Freq: 37 << 16, Offset: -2500, Constant: 10, Status: unix.STA_PLL}, false, 37e-6 + 2.5e-3/4096},
		{"chrony slewing", unix.Timex{Tick: 10833, Freq: -120 << 16}, false, 0.0833 + 120e-6},
		{"500 ppm and adjtime", unix.Timex{Tick: 10000, Freq: 500 << 16}, true, 1e-3},
		{"100 ms offset, nanoseconds", unix.Timex{Tick: 10000, Offset: 100e6, Constant: 2, Status: unix.STA_NANO | unix.STA_PLL}, false, 100e-3 / 16},
	} {
		got := slewOf(&c.tx, c.adjtime)
		require.InDelta(t, c.want, got, 1e-12, c.name)
		require.Equal(t, c.want > maxSlew, got > maxSlew, c.name)
	}
	_, err := clockSlew()
	require.NoError(t, err, "adjtimex reads without privilege")
}
