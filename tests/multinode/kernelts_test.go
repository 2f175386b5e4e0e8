package multinode

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloudprofiler/minrtt"
	"cloudprofiler/tests/internal/netns"
	"cloudprofiler/tsc"
)

// TestKernelTimestamps: three nodes on plain veth (no injected delay), each
// with its own fake counter. The TSC clients time every probe twice: as
// their kernels timed it (software timestamps placed on the counters) and
// as the processes did (the counter read around each send and receive,
// the method before kernel timestamps); the rounds files keep both. Against
// the exactly known truth, for both timings of the same probes: every probe
// is causal, and models built from them (each method) translate every
// node's counter into the reference within their bounds, at the probes'
// own instants and between the rounds (0 violations). The kernel-timed
// bounds must be below half the process-timed ones (median), and between
// the rounds (where a profiled run's records fall) within 1.1x the floor
// the rounds' kernel-timed probes allow: (min forward + min reverse true
// one-way delay)/2 of a round, which no strict method can beat at its
// instants (the mean of the two rounds').
func TestKernelTimestamps(t *testing.T) {
	e := needEnv(t)
	needCommands(t, e.tool)
	nodes := []node{{name: "a", fake: "1.0:-3000000000"}, {name: "b", fake: "0.9996:70000000000"}, {name: "c", fake: "1.00037:-2000000000"}}
	fakes, names := parseFakes(t, nodes)
	tmp := t.TempDir()
	l := netns.New(t, "kts", names, tmp)
	roundsDir := filepath.Join(tmp, "rounds")
	server := fmt.Sprintf("%s:%d", l.HubIP, tscPort)
	srv := l.Start("tsc-server", l.Hub, nil, e.tool, "tsc-server", "--listen", server, "--out", roundsDir,
		"--probes", fmt.Sprint(probesPerDir))
	srv.WaitOutput(t, "listening on", 10*time.Second)
	procs := []*netns.Proc{srv}
	for _, n := range nodes {
		procs = append(procs, l.Start("tsc-client-"+n.name, l.NS[n.name], []string{"CP_FAKE_TSC=" + n.fake},
			e.tool, "tsc-client", "--server", server, "--node", n.name))
	}
	for i, label := range []string{"before", "after"} {
		if i > 0 {
			time.Sleep(2 * time.Second) // translations between the rounds interpolate
		}
		out, err := l.Run(60*time.Second, l.Hub, nil, e.tool, "tsc-round", "--server", server, "--label", label,
			"--wait-nodes", fmt.Sprint(len(nodes)), "--wait-timeout", "15s")
		if err != nil {
			t.Fatalf("check failed: tsc-round %s: %v", label, err)
		}
		t.Logf("round %s: %s", label, strings.TrimSpace(out))
	}
	for _, p := range procs {
		p.Stop(5 * time.Second)
	}
	kernel, err := minrtt.ReadRounds(roundsDir)
	if err != nil {
		t.Fatalf("check failed: %v", err)
	}
	checkRounds(t, kernel, len(nodes))
	var user []*minrtt.Round
	for _, r := range kernel {
		for _, d := range r.Dirs {
			if !strings.HasPrefix(d.Timestamps, "kernel") || d.KernelProbes < len(d.Probes)*9/10 || len(d.UserProbes) != len(d.Probes) {
				t.Errorf("check failed: round %q %s->%s: timestamps %q, %d of %d probes kernel-timed, %d process-timed: want the kernels' on at least 90%%, and every probe process-timed too",
					r.Label, d.Origin, d.Responder, d.Timestamps, d.KernelProbes, len(d.Probes), len(d.UserProbes))
			}
		}
		user = append(user, r.UserTimed())
	}

	// Every probe causal, both ways it was timed (probeDelays fails on
	// a one-way delay below zero); the floors of each.
	kDelays, n, err := probeDelays(fakes, kernel)
	if err != nil {
		t.Fatalf("check failed: kernel-timed: %v", err)
	}
	uDelays, _, err := probeDelays(fakes, user)
	if err != nil {
		t.Fatalf("check failed: process-timed: %v", err)
	}
	t.Logf("%d probes, each causal as the kernels and as the processes timed it", n)
	var sb strings.Builder
	for i, a := range names {
		for _, b := range names[i+1:] {
			fmt.Fprintf(&sb, "  %s-%s: kernel %s; process %s\n", a, b, kDelays.floorText(a, b), uDelays.floorText(a, b))
		}
	}
	t.Logf("floor (min fwd + min rev one-way delay)/2 of every pair, from the probes' true delays:\n%s", sb.String())

	// The instants translated: each node's counter at its probes' sends
	// in each round (every tenth), and twenty spread between the rounds.
	type instant struct {
		c     uint64
		round int // -1: between the rounds
	}
	instants := map[string][]instant{}
	for ri, r := range kernel {
		for _, d := range r.Dirs {
			for i := 0; i < len(d.UserProbes); i += 10 {
				instants[d.Origin] = append(instants[d.Origin], instant{d.UserProbes[i].Send, ri})
			}
		}
	}
	for name, xs := range instants {
		lo, hi := xs[0].c, xs[0].c
		for _, x := range xs {
			lo, hi = min(lo, x.c), max(hi, x.c)
		}
		for k := 1; k <= 20; k++ {
			instants[name] = append(instants[name], instant{lo + (hi-lo)/21*uint64(k), -1})
		}
	}
	const ref = "a"
	fr := fakes[ref]
	hz := tsc.HardwareFreq().Hz
	us := func(c float64) float64 { return c / hz * 1e6 }
	// bounds: node -> round (len(kernel): between them) -> every bound,
	// reference cycles.
	type bounds map[string][][]float64
	check := func(what string, rounds []*minrtt.Round, method minrtt.Method) bounds {
		m, err := minrtt.NewModel(rounds, minrtt.Options{Ref: ref, Method: method})
		if err != nil {
			t.Fatalf("check failed: %s: %v", what, err)
		}
		for _, l := range m.Links() {
			kernelTimed := rounds[0].Dirs[0].UserProbes != nil
			if kernelTimed && l.KernelProbes < l.Probes*9/10 || !kernelTimed && l.KernelProbes != 0 {
				t.Errorf("check failed: %s: link %s<-%s: %d of %d probes timed by the kernels", what, l.Into, l.From, l.KernelProbes, l.Probes)
			}
		}
		out := bounds{}
		bad := 0
		for _, name := range names[1:] {
			i := m.NodeIndex(name)
			out[name] = make([][]float64, len(rounds)+1)
			for _, x := range instants[name] {
				v := m.PointRelIdx(i, x.c)
				raw := rawMid(fakes[name], x.c)
				truth := (raw*fr.Rate() + float64(fr.Offset)) - float64(m.RefOrigin())
				if math.Abs(truth-v.Est) > v.Err+slackCycles {
					if bad++; bad <= 5 {
						t.Errorf("check failed: %s: %s's %d: %.1f +- %.1f in %s's counter, truth %.1f", what, name, x.c, v.Est, v.Err, ref, truth)
					}
				}
				k := x.round
				if k < 0 {
					k = len(rounds)
				}
				out[name][k] = append(out[name][k], v.Err)
			}
		}
		if bad > 0 {
			t.Errorf("check failed: %s: %d translations outside their bounds", what, bad)
		}
		return out
	}
	// The floor of each round's kernel-timed probes: within a round the
	// bound can be no tighter (across rounds the counters' rates are
	// not known well enough to combine the best probe of one with the
	// best of another).
	floors := make([]oneWay, len(kernel))
	for ri := range kernel {
		if floors[ri], _, err = probeDelays(fakes, kernel[ri:ri+1]); err != nil {
			t.Fatalf("check failed: %v", err)
		}
	}
	// floorAt is the floor of round k's probes between ref and name, in
	// the reference's cycles; between the rounds (k past the last), the
	// mean of the rounds' (a bound between two rounds narrows or widens
	// from one's to the other's, and the instants are spread evenly).
	var name string
	floorAt := func(k int) float64 {
		if k < len(kernel) {
			f, _ := floors[k].floor(ref, name)
			return f * fr.Rate() // hardware cycles to the reference's
		}
		sum := 0.0
		for r := range kernel {
			f, _ := floors[r].floor(ref, name)
			sum += f * fr.Rate()
		}
		return sum / float64(len(kernel))
	}
	var tab strings.Builder
	fmt.Fprintf(&tab, "%-10s %-4s %-8s %12s %12s %8s %12s\n", "method", "node", "round", "kernel (us)", "process (us)", "ratio", "floor (us)")
	for _, meth := range []minrtt.Method{minrtt.MethodBest, minrtt.MethodPaper, minrtt.MethodAllProbes} {
		kb := check("kernel-timed, "+meth.String(), kernel, meth)
		ub := check("process-timed, "+meth.String(), user, meth)
		for _, name = range names[1:] {
			for k := range kb[name] {
				km, _, _ := stats(kb[name][k])
				um, _, _ := stats(ub[name][k])
				label := "between"
				if k < len(kernel) {
					label = kernel[k].Label
				}
				floor := floorAt(k)
				fmt.Fprintf(&tab, "%-10s %-4s %-8s %12.2f %12.2f %8.2f %12.2f\n", meth, name, label, us(km), us(um), km/um, us(floor))
				if meth != minrtt.MethodBest {
					continue
				}
				if km >= um/2 {
					t.Errorf("check failed: %s to %s, %s: median bound %.2f us with kernel timestamps, %.2f us without: want below half", name, ref, label, us(km), us(um))
				}
				if k == len(kernel) && km > 1.1*floor {
					t.Errorf("check failed: %s to %s, between the rounds: median bound %.2f us with kernel timestamps, over 1.1x the rounds' mean floor (%.2f us)", name, ref, us(km), us(floor))
				}
			}
		}
	}
	t.Logf("median bound of %s's counter in %s's, at %d instants a node (the probes' in each round, 20 between), translated from the same probes as the kernels and as the processes timed them; the floor of each round's kernel-timed probes:\n%s",
		strings.Join(names[1:], " and "), ref, len(instants["b"]), tab.String())
}
