package minrtt_test

import (
	"context"
	"math"
	"math/rand"
	"sort"
	"testing"
	"time"

	"cloudprofiler/minrtt"
	"cloudprofiler/minrtt/probe"
	"cloudprofiler/tsc"

	"github.com/stretchr/testify/require"
)

// End to end over real UDP on loopback: the TSC server and four in-process
// clients, each with its own fake counter derived from the one hardware TSC
// (tsc.Fake: floor(raw*q/2^32) + offset), some with injected asymmetric
// delay, jitter and spikes. The hardware TSC is the true time, so every
// translated value can be checked exactly.
func TestEndToEndLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real rounds over UDP")
	}
	dir := t.TempDir()
	srv := &probe.Server{Listen: "127.0.0.1:0", OutDir: dir, Probes: 80, Interval: 50 * time.Microsecond, Logf: t.Logf}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(func() { srv.Close() })

	specs := map[string]string{"a": "1:1000000000000", "b": "0.9997:500000000000", "c": "1.0004:3000000000000", "d": "1.00013:7"}
	inject := map[string]*probe.Inject{
		"b": {Fwd: 30 * time.Microsecond, Rev: 5 * time.Microsecond, Jitter: 20 * time.Microsecond, SpikeP: 0.02, Spike: time.Millisecond, Seed: 1},
		"c": {Fwd: 5 * time.Microsecond, Rev: 25 * time.Microsecond, Jitter: 10 * time.Microsecond, Seed: 2},
	}
	fakes := map[string]tsc.Fake{}
	hw := tsc.HardwareFreq()
	for name, spec := range specs {
		f, err := tsc.ParseFake(spec)
		require.NoError(t, err)
		fakes[name] = f
		c := &probe.Client{Server: srv.Addr(), Node: name, Inject: inject[name],
			Clock: func() uint64 { return f.Apply(tsc.Raw()) },
			Freq:  tsc.Frequency{Hz: hw.Hz * f.Rate(), Source: "test fake " + f.String()},
			Logf:  t.Logf}
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		t.Cleanup(func() { c.Close(); <-done })
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	require.NoError(t, srv.WaitNodes(wctx, 4))

	raw0 := tsc.Raw()
	for i, label := range []string{"before", "during", "after"} {
		if i > 0 {
			time.Sleep(300 * time.Millisecond)
		}
		_, _, err := srv.RequestRound(label)
		require.NoError(t, err)
	}
	raw1 := tsc.Raw()
	rs, err := minrtt.ReadRounds(dir)
	require.NoError(t, err)
	require.Len(t, rs, 3)

	// True raw instant (continuous) of a fake reading, and a raw instant
	// in a fake counter (continuous).
	rawOf := func(f tsc.Fake, c uint64) float64 { return float64(int64(c)-f.Offset) / f.Rate() }
	fakeAt := func(f tsc.Fake, raw float64) float64 { return raw*f.Rate() + float64(f.Offset) }

	// The floor per pair, from the true one-way delays of all probes.
	minOW := map[[2]string]float64{}
	see := func(from, to string, d float64) {
		k := [2]string{from, to}
		if v, ok := minOW[k]; !ok || d < v {
			minOW[k] = d
		}
	}
	for _, r := range rs {
		for _, d := range r.Dirs {
			fo, fp := fakes[d.Origin], fakes[d.Responder]
			for _, p := range d.Probes {
				s, x, v := rawOf(fo, p.Send), rawOf(fp, p.Resp), rawOf(fo, p.Recv)
				require.True(t, s <= x+2 && x <= v+2, "causality")
				see(d.Origin, d.Responder, x-s)
				see(d.Responder, d.Origin, v-x)
			}
		}
	}

	for _, meth := range []minrtt.Method{minrtt.MethodBest, minrtt.MethodPaper, minrtt.MethodAllProbes} {
		m, err := minrtt.NewModel(rs, minrtt.Options{Ref: "a", Method: meth})
		require.NoError(t, err, meth.String())
		fa := fakes["a"]
		rng := rand.New(rand.NewSource(1))
		var errs, ratio []float64
		viol := 0
		names := []string{"a", "b", "c", "d"}
		span := float64(raw1 - raw0)
		for q := 0; q < 20000; q++ {
			// Points, within the rounds and up to 10% beyond.
			n := names[rng.Intn(4)]
			raw := float64(raw0) + (rng.Float64()*1.2-0.1)*span
			c := uint64(math.Floor(fakeAt(fakes[n], raw)))
			v, err := m.Point(n, c)
			require.NoError(t, err)
			truth := fakeAt(fa, rawOf(fakes[n], c))
			if math.Abs(truth-v.Est) > v.Err+1e-3 {
				viol++
			}
			if n != "a" && raw >= float64(raw0) && raw <= float64(raw1) {
				errs = append(errs, v.Err)
				fl := (minOW[[2]string{n, "a"}] + minOW[[2]string{"a", n}]) / 2 * fa.Rate()
				ratio = append(ratio, v.Err/fl)
			}
			// Durations of up to 10 ms between two random nodes.
			sn, en := names[rng.Intn(4)], names[rng.Intn(4)]
			rs0 := float64(raw0) + rng.Float64()*span
			rs1 := rs0 + rng.Float64()*0.01*hw.Hz
			su, eu := uint64(math.Floor(fakeAt(fakes[sn], rs0))), uint64(math.Floor(fakeAt(fakes[en], rs1)))
			d, err := m.Duration(sn, su, en, eu)
			require.NoError(t, err)
			dt := (rawOf(fakes[en], eu) - rawOf(fakes[sn], su)) * fa.Rate()
			if math.Abs(dt-d.Est) > d.Err+1e-3 {
				viol++
			}
		}
		require.Zero(t, viol, meth.String())
		sort.Float64s(errs)
		sort.Float64s(ratio)
		t.Logf("%s: point error off the reference, within the rounds: median %.0f max %.0f cycles (%.1f/%.1f us); error/floor median %.2f",
			meth, errs[len(errs)/2], errs[len(errs)-1], errs[len(errs)/2]/m.RefHz()*1e6, errs[len(errs)-1]/m.RefHz()*1e6, ratio[len(ratio)/2])
	}
}
